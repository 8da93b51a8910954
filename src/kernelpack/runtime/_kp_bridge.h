/* The interface between the launch extension (_launch, plain C, abi3) and the optional torch bridge
 * (_torch_bridge, C++ built against one torch version): a capsule named KP_BRIDGE_CAPSULE holding a kp_bridge. */
#ifndef KP_BRIDGE_H
#define KP_BRIDGE_H

#include <stdint.h>

#define KP_BRIDGE_ABI 3
#define KP_BRIDGE_CAPSULE "kernelpack.runtime._torch_bridge.api"

#define KP_VIEW_ELSEWHERE (-1) /* kp_view.device: a torch tensor not in CUDA device memory */
#define KP_VIEW_NONE (-2)      /* kp_view.device: not a torch tensor (nothing else set) */

typedef struct kp_view {
    uint64_t data;
    const int64_t* shape;  /* valid while the tensor lives */
    const int64_t* stride; /* in elements */
    int32_t ndim;
    int16_t device;     /* CUDA ordinal of a tensor in CUDA device memory, else KP_VIEW_ELSEWHERE or KP_VIEW_NONE */
    int8_t dtype;       /* kp_dtype code (KP_DT_* of kp_model.h), KP_DT_ANY = none of them */
    uint8_t contiguous; /* C-contiguous as torch defines it */
} kp_view;

typedef struct kp_bridge {
    int abi; /* KP_BRIDGE_ABI */
    /* The arguments of a launch that may be tensors, at once: for k < n, out[i] describes args[i], i = which[k]
     * (device KP_VIEW_NONE: not a torch tensor); ndim, shape and stride only where dims[i] (arguments some plan packs
     * as a tensor or tensor descriptor; else left unset). Returns the number of tensors, or -1 for a tensor the
     * bridge cannot read (no exception set). */
    int (*unpack_args)(PyObject* const* args, const uint8_t* which, int n, const uint8_t* dims, kp_view* out);
    /* 0: *out = torch's current stream on CUDA device `device`; -1: not available (no exception set): the caller
     * asks the Python-level getter (runtime/streams.py c_getter) */
    int (*current_stream)(int device, uint64_t* out);
    int cuda_streams; /* 1: current_stream reads c10's current stream (built against torch's CUDA headers) */
} kp_bridge;

#endif
