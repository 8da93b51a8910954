/* kp_model.h: kernelpack's launch model (kernelpack/launch/), rendered for C. Generated: do not edit.
 * Regenerate with `python -m kernelpack.launch.header`; tests/test_launch_model.py fails when it drifts.
 *
 * Included by the C library's runtime (pasted into every generated translation unit), the Python runtime's C
 * extension (runtime/_launch.c) and the CuTe host shim and entries (cute_host/). Everything is a macro, a type or
 * a static inline function: no symbol is defined.
 */
#ifndef KP_MODEL_H
#define KP_MODEL_H

#include <stdint.h>

/* ---- element types: kp_dtype values */
#define KP_DT_ANY 0 /* untyped */
#define KP_DT_I8 1 /* int8_t */
#define KP_DT_I16 2 /* int16_t */
#define KP_DT_I32 3 /* int32_t */
#define KP_DT_I64 4 /* int64_t */
#define KP_DT_U8 5 /* uint8_t */
#define KP_DT_U16 6 /* uint16_t */
#define KP_DT_U32 7 /* uint32_t */
#define KP_DT_U64 8 /* uint64_t */
#define KP_DT_F16 9 /* kp_f16 */
#define KP_DT_BF16 10 /* kp_bf16 */
#define KP_DT_F32 11 /* float */
#define KP_DT_F64 12 /* double */
#define KP_DT_BOOL 13 /* bool */
#define KP_DT_F8E4M3 14 /* uint8_t storage of fp8 bits */
#define KP_DT_F8E5M2 15 /* uint8_t storage of fp8 bits */
#define KP_DTYPE_COUNT 16
#define KP_DTYPE_NAMES {"any", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "bool", "f8e4m3", "f8e5m2"} /* indexed by kp_dtype */
/* X(c10::ScalarType enumerator, kp_dtype) for every dtype torch names (the torch bridge's table) */
#define KP_TORCH_DTYPES(X) \
    X(Char, KP_DT_I8) \
    X(Short, KP_DT_I16) \
    X(Int, KP_DT_I32) \
    X(Long, KP_DT_I64) \
    X(Byte, KP_DT_U8) \
    X(UInt16, KP_DT_U16) \
    X(UInt32, KP_DT_U32) \
    X(UInt64, KP_DT_U64) \
    X(Half, KP_DT_F16) \
    X(BFloat16, KP_DT_BF16) \
    X(Float, KP_DT_F32) \
    X(Double, KP_DT_F64) \
    X(Bool, KP_DT_BOOL) \
    X(Float8_e4m3fn, KP_DT_F8E4M3) \
    X(Float8_e5m2, KP_DT_F8E5M2)

/* ---- CUresult values the code reacts to */
#define KP_CUDA_SUCCESS 0
#define KP_CUDA_ERROR_INVALID_VALUE 1
#define KP_CUDA_ERROR_NOT_INITIALIZED 3
#define KP_CUDA_ERROR_NO_DEVICE 100
#define KP_CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define KP_CUDA_ERROR_INVALID_CONTEXT 201
#define KP_CUDA_ERROR_NOT_FOUND 500
#define KP_CUDA_ERROR_NOT_SUPPORTED 801

/* ---- driver attributes */
#define KP_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define KP_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X 2
#define KP_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y 3
#define KP_CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z 4
#define KP_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X 5
#define KP_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y 6
#define KP_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z 7
#define KP_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define KP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define KP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define KP_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define KP_CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 120
#define KP_CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH 95
#define KP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define KP_CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED 14
#define KP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define KP_CU_LAUNCH_ATTRIBUTE_COOPERATIVE 2
#define KP_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4
#define KP_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6

/* ---- launch limits */
#define KP_CUDA_API_VERSION 12000
#define KP_MAX_DEVICES 64
#define KP_SMEM_DEFAULT_LIMIT 49152u
#define KP_MAX_PORTABLE_CLUSTER 8u
#define KP_MAX_BLOCK_X 1024u
#define KP_MAX_BLOCK_Y 1024u
#define KP_MAX_BLOCK_Z 64u
#define KP_MAX_BLOCK_THREADS 1024u
#define KP_MAX_GRID_X 2147483647u
#define KP_MAX_GRID_Y 65535u
#define KP_MAX_GRID_Z 65535u
#ifndef KP_MAX_RANK
#define KP_MAX_RANK 8 /* kp_tensor modes (also in every library's public header) */
#endif
#define KP_DYN INT64_MIN /* a tensor mode passed at run time */

/* ---- launch flags (kp_launch.flags, kp_bin_launch.flags; the runtime's pdl= / cooperative=) */
#define KP_LF_PDL 1u
#define KP_LF_NO_PDL 2u
#define KP_LF_COOPERATIVE 4u
#define KP_PDL_MIN_MAJOR 9

/* ---- how a parameter is filled (runtime plans: kernelpack/launch/plan.py) and grid-formula steps */
#define KP_OP_NULL 0
#define KP_OP_PTR 1
#define KP_OP_SCALAR 2
#define KP_OP_TENSOR 3
#define KP_OP_BYTES 4
#define KP_OP_SCRATCH 5
#define KP_OP_DESC 6
#define KP_OP_DESC_FIELD 7
#define KP_OP_DEVICE 8
#define KP_OP_LIST 9
#define KP_OP_LIST_COUNT 10
#define KP_G_CONST 0
#define KP_G_LOAD 1
#define KP_G_ADD 2
#define KP_G_SUB 3
#define KP_G_MUL 4
#define KP_G_DIV 5
#define KP_G_CEIL_DIV 6
#define KP_G_MIN 7
#define KP_G_MAX 8

/* ---- device properties a launch reads (kernelpack/launch/device.py): device-derived params, requirements */
#define KP_DP_SM_COUNT 1 /* streaming multiprocessors on the device */
#define KP_DP_MAX_DYNAMIC_SMEM 2 /* bytes of shared memory a block can opt into on the device */
#define KP_DP_MAX_ACTIVE_CLUSTERS 3 /* clusters of a given size of the kernel that fit at once (cuOccupancyMaxActiveClusters) */
#define KP_REQUIRES_BONUS 10000 /* quality a satisfied requirement adds */
#define KP_MAC_BLOCK 128u /* threads per block of the max_active_clusters query when the kernel fixes none */

/* The dynamic shared memory of the max_active_clusters query: all a block can have, so one block fills an SM. */
static inline uint32_t kp_mac_smem(int32_t smem_optin, uint32_t static_smem) {
    return smem_optin > 0 && (uint32_t)smem_optin > static_smem ? (uint32_t)smem_optin - static_smem : 0;
}

/* ---- which binary a device runs (kernelpack/launch/binaries.py): the best quality > 0 wins */
#define KP_MATCH_EXACT 1      /* exactly the binary's major.minor */
#define KP_MATCH_SAME_MAJOR 2 /* the same major, minor >= the binary's */
#define KP_MATCH_AT_MOST 3    /* an SM number >= the binary's */
typedef struct kp_bin_rule {
    uint8_t ptx;     /* 1: PTX, 0: SASS */
    char suffix;     /* 'a', 'f', or 0 = any suffix no other row of this kind names */
    uint8_t match;   /* KP_MATCH_* */
    uint16_t base;   /* quality where it matches */
    uint8_t plus;    /* add 1: the binary's minor, 2: its SM number */
} kp_bin_rule;
static const kp_bin_rule kp_bin_rules[] = {
    {0, 'a', 1, 3000, 0},
    {0, 'f', 2, 2000, 1},
    {0, 0, 2, 2000, 1},
    {1, 'a', 1, 1000, 2},
    {1, 'f', 2, 1000, 2},
    {1, 0, 3, 1000, 2}
};

/* The quality of a binary (PTX when ptx; arch major.minor + suffix) on a device dmajor.dminor; 0 = cannot run. */
static inline int32_t kp_bin_rule_quality(int ptx, int major, int minor, char suffix, int dmajor, int dminor) {
    const kp_bin_rule* r = 0;
    for (unsigned i = 0; i < sizeof kp_bin_rules / sizeof kp_bin_rules[0]; i++) {
        const kp_bin_rule* c = &kp_bin_rules[i];
        if (c->ptx != (ptx != 0)) continue;
        if (suffix != 0 && c->suffix == suffix) { r = c; break; }
        if (c->suffix == 0 && r == 0) r = c;
    }
    if (r == 0) return 0;
    int ok = r->match == KP_MATCH_EXACT ? major == dmajor && minor == dminor
           : r->match == KP_MATCH_SAME_MAJOR ? major == dmajor && minor <= dminor
           : major * 10 + minor <= dmajor * 10 + dminor;
    if (!ok) return 0;
    return (int32_t)r->base + (r->plus == 1 ? minor : r->plus == 2 ? major * 10 + minor : 0);
}

#endif /* KP_MODEL_H */
