/* kernelpack C runtime, part 1: driver API declarations and the table types the generator fills.
 *
 * Pasted (not #included) into every generated translation unit, after the public header and the launch model
 * (kp_model.h: every limit, code and rule both back ends share). Everything here is static or a type: two
 * kernelpack libraries in one process, or two static archives in one program, never share a symbol. No CUDA header
 * is needed: the few driver types are declared here and their layouts locked with static asserts against the
 * sizes of CUDA 12/13's cuda.h (checked by the test suite against the real header).
 */

#define KP_STATIC_ASSERT(cond, tag) typedef char kp_static_assert_##tag[(cond) ? 1 : -1]
KP_STATIC_ASSERT(sizeof(kp_f16) == 2 && sizeof(kp_bf16) == 2, half_size);

/* One carried binary of one specialization, with the launch facts read from its cubin at build time. This table and
 * kp_blob_info's are emitted by the data object (clib/dataobj.py writes them in assembly: keep the layouts equal). */
typedef struct kp_bin_info {
    uint32_t blob;       /* index into kp_blobs */
    uint8_t major, minor;
    char suffix;         /* 'a', 'f' or 0 */
    uint8_t is_ptx;
    uint32_t reqntid[3]; /* the only block the driver accepts; 0 = none */
    uint16_t cluster[3]; /* compile-time (explicit) cluster dims; 0 = none */
    uint16_t max_threads; /* __launch_bounds__ threads per block; 0 = unknown */
    uint32_t static_smem;
} kp_bin_info;

/* A blob of the embedded bundle: byte range of a cubin or PTX text (bundles are < 4 GiB), stored as is
 * (raw_size 0) or as a zlib stream that expands to raw_size bytes. */
typedef struct kp_blob_info {
    uint32_t offset, size;
    uint32_t is_ptx;
    uint32_t raw_size;
} kp_blob_info;

KP_STATIC_ASSERT(sizeof(kp_bin_info) == 32 && offsetof(kp_bin_info, reqntid) == 8 &&
                     offsetof(kp_bin_info, cluster) == 20 && offsetof(kp_bin_info, max_threads) == 26 &&
                     offsetof(kp_bin_info, static_smem) == 28, bin_info_layout);
KP_STATIC_ASSERT(sizeof(kp_blob_info) == 16, blob_info_layout);

/* Strings live in one pool (kp_strtab) and are referred to by offset: no relocations per kernel. */
#define KP_STR(off) (kp_strtab + (off))

/* A tensor-descriptor argument (kernelpack.core.tma.TensorDescSpec): the entry takes a kp_tensor and fills the params. */
typedef struct kp_desc_info {
    uint32_t arg;    /* parameter name (offset in kp_strtab) */
    uint32_t box[5]; /* box dims, outermost first (tma lowering) */
    uint8_t rank, lowering /* 0 tma, 1 decomposed */, elem_size, elem_type /* CUtensorMapDataType */, swizzle,
        fp4_padded, dtype /* kp_dtype the tensor must have; 0 = any */;
} kp_desc_info;

/* A tensor-list argument (kernelpack.core.abi.TensorList): the entry takes kp_tensor[count] and passes the kernel the
 * device address of one descriptor per tensor (1 + 2 * rank 64-bit words: data pointer, extents, strides) and the
 * count (kp_run_lists). What every tensor of the list must be: */
typedef struct kp_list_info {
    uint32_t arg;      /* parameter name (offset in kp_strtab) */
    uint32_t align;    /* of the data, in bytes */
    uint8_t dtype, rank, index_dt; /* kp_dtype of the elements, of the index type */
    int64_t index_min, index_max;  /* every extent and stride fits the kernel's index type */
    int64_t shape[KP_MAX_RANK], stride[KP_MAX_RANK]; /* a static mode's value; KP_DYN: any */
    int64_t shape_div[KP_MAX_RANK], stride_div[KP_MAX_RANK]; /* multiples (1: any) */
    int64_t stride_min[KP_MAX_RANK];                          /* the least stride; KP_DYN: none */
} kp_list_info;

/* One specialization (one KernelArtifact). */
typedef struct kp_spec_info {
    uint32_t label;      /* kernel[variant], for messages (offset in kp_strtab) */
    uint32_t entry;      /* symbol in the binaries */
    uint32_t archs;      /* "sm_80, sm_90a", for messages */
    uint32_t first_bin, nbin;
    uint32_t first_req, nreq; /* its device requirements: kp_requires[first_req .. first_req + nreq) */
    uint32_t requires;   /* "sm_count == 132", for messages */
} kp_spec_info;

/* What one binary launches with (kernelpack.launch.facts): the LaunchSpec of its arch (the artifact's, or the arch's
 * own) and which of its specialization's parameter layouts it takes. Indexed like kp_bins; generated from the
 * launch specs, so it lives in the translation unit (kp_bin_info's cubin facts live in the data object). */
typedef struct kp_bin_launch {
    uint32_t block[3];   /* LaunchSpec.block; 0 = none */
    uint32_t dyn_smem;   /* LaunchSpec.dynamic_smem */
    uint32_t cluster[3]; /* LaunchSpec.cluster; 0 = none */
    uint32_t layout;     /* 0 = the artifact's own */
    uint32_t flags;      /* KP_LF_* of LaunchSpec.pdl / .cooperative */
} kp_bin_launch;

/* A device requirement of a specialization (KernelArtifact.requires): device property prop (KP_DP_*) == value. */
typedef struct kp_require {
    uint32_t prop;
    uint32_t name; /* the property's name (offset in kp_strtab) */
    int64_t value;
} kp_require;
