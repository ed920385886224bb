#!/bin/sh
# A program that is not Python, for `--no-python`: each rank says who it is, then exits with $1 (default 0).
echo "rank $RANK of $WORLD_SIZE"
echo "rank $RANK says hello on stderr" >&2
exit "${1:-0}"
