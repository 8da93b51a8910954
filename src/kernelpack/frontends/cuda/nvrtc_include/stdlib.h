#pragma once
/* kernelpack: NVRTC has no C library headers; cuda.h includes this one only for size_t, which NVRTC has built in. */
