"""The core: errors, settings, bounded file reads, names, the typed ABI, archs, the cubin and PTX readers, tensor
descriptors, parameter packing, ABI verification and the compile cache. Imports nothing else of kernelpack."""
