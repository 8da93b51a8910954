/* The interface between the launch extension (_launch, plain C, abi3) and the optional torch bridge
 * (_torch_bridge, C++ built against one torch version): a capsule named KP_BRIDGE_CAPSULE holding a kp_bridge. */
#ifndef KP_BRIDGE_H
#define KP_BRIDGE_H

#include <stdint.h>

#define KP_BRIDGE_ABI 2
#define KP_BRIDGE_CAPSULE "kernelpack.runtime._torch_bridge.api"

typedef struct kp_view {
    uint64_t data;
    const int64_t* shape;  /* valid while the tensor lives */
    const int64_t* stride; /* in elements */
    int32_t ndim;
    int8_t dtype;       /* kp_dtype code (KP_DT_* of kp_model.h), KP_DT_ANY = none of them */
    int8_t device_type; /* 1 = CUDA device memory, 0 = anything else */
    int16_t device;     /* CUDA ordinal */
    uint8_t contiguous; /* C-contiguous as torch defines it */
} kp_view;

typedef struct kp_bridge {
    int abi; /* KP_BRIDGE_ABI */
    /* 1: a torch tensor, *out filled; 0: not a torch tensor; -1: a tensor the bridge cannot read (no exception set) */
    int (*unpack)(PyObject* obj, kp_view* out);
    /* the same without ndim, shape and stride (left unset): for arguments no plan packs as a tensor descriptor */
    int (*unpack_ptr)(PyObject* obj, kp_view* out);
    /* 0: *out = torch's current stream on CUDA device `device`; -1: not available (no exception set): the caller
     * asks the Python-level getter (runtime/streams.py c_getter) */
    int (*current_stream)(int device, uint64_t* out);
    int cuda_streams; /* 1: current_stream reads c10's current stream (built against torch's CUDA headers) */
} kp_bridge;

#endif
