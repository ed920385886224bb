"""The one build step pyproject.toml cannot say: ship examples/*.ipynb as distlab/walkthroughs/*.ipynb.

pyproject.toml finds the packages (`distlab`, `distlab.*`) and maps `distlab.walkthroughs` to examples/, but
setuptools builds only the packages `find` returned, so build_py adds that one. Everything else is in pyproject.toml.
"""
from setuptools import setup
from setuptools.command.build_py import build_py

WALKTHROUGHS = "distlab.walkthroughs"  # mapped to examples/ by [tool.setuptools.package-dir]


class build_py_with_walkthroughs(build_py):
    "build_py that also builds the walkthroughs package (the notebooks are its package data)."
    def finalize_options(self):
        super().finalize_options()
        if WALKTHROUGHS not in (self.packages or []): self.packages = [*(self.packages or []), WALKTHROUGHS]


setup(cmdclass={"build_py": build_py_with_walkthroughs})
