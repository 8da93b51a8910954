"""The first bytes of a ``.kpack`` bundle (``kpack.py`` writes and reads the format): what ``kernelpack.load`` tells
a bundle from a built library by, without importing the bundle reader for a library."""

MAGIC = b"\x7fKPACK\r\n"
