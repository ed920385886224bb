"torchrun as a subprocess: launch, its command line and output, the reaper, kernel interrupt hooks."
