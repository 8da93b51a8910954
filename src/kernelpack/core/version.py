"""kernelpack's version: one place, read by the package, the build and every generated file."""

__version__ = "0.1.0"
