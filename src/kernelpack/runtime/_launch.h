/* kernelpack.runtime._launch -- what every part of the extension shares: limits and helper macros (KP_NARROW),
 * the driver's launch structs and entry points, the process-wide state, and the structs of plans, device tables,
 * families, one launch's arguments and a prepared launch's capture. Included once, by _launch.c (one translation
 * unit), so its static objects are the extension's own; each part includes it too (its guard makes that a no-op).
 */
#ifndef KP_LAUNCH_H
#define KP_LAUNCH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_kp_bridge.h"
#include "kp_model.h" /* the launch model: dtype and op codes, limits, CUDA results (kernelpack/launch/) */

#if PY_VERSION_HEX < 0x030C0000 || !defined(Py_LIMITED_API)
#include <structmember.h>
#endif
#ifndef Py_T_PYSSIZET
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif

#define KP_MAX_SLOTS 64
#define KP_MAX_DEVICE_VALUES 4 /* device-derived params per plan (more: the Python path) */
#define KP_BUF 4096
#define KP_MAX_TMA_RANK 5  /* cuTensorMapEncodeTiled's */
#define KP_TMAP_CACHE 16   /* encoded tensor maps kept per family (least recently used replaced) */
#define KP_LIST_VIEWS 1024 /* the tensors of one launch's lists the C path reads (more: the Python path) */
#define KP_LIKELY(x) __builtin_expect(!!(x), 1)
#define KP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KP_INLINE inline __attribute__((always_inline)) /* the per-argument steps of a launch */
#define KP_NOINLINE __attribute__((noinline)) /* rarer steps kept out of the per-argument loop */
#define KP_DT_LAST KP_DT_F8E5M2 /* the highest kp_dtype code (kp_model.h) */

/* Checked narrowing of an integer a plan, a dispatch record or a device table gives (a record is data: anyone who
 * writes a .kpack can recompute its hashes, so it may say anything). The wide value v (long long, as parsed) is
 * stored in field dst when it survives the conversion to the field's own type unchanged -- the width it is stored
 * in -- and then lies in [lo, hi], the real bound (an argument index below the slots, an offset inside the buffer,
 * a dtype code, ...). 1: stored; 0: not, and dst = lo (a value every reader of the field takes). */
#define KP_NARROW(dst, v, lo, hi)                                                                                   \
    __extension__({                                                                                                  \
        const long long kp_v_ = (v);                                                                                 \
        const __typeof__(dst) kp_n_ = (__typeof__(dst))kp_v_;                                                        \
        const int kp_ok_ = (long long)kp_n_ == kp_v_ && kp_v_ >= (long long)(lo) && kp_v_ <= (long long)(hi);        \
        (dst) = kp_ok_ ? kp_n_ : (__typeof__(dst))(lo);                                                              \
        kp_ok_;                                                                                                      \
    })


/* ------------------------------------------------------------------ driver */

typedef int CUresult;
typedef struct {
    unsigned int id;
    char pad[4];
    union {
        char bytes[64];
        struct {
            unsigned int x, y, z;
        } cluster;
    } value;
} kp_attr;
typedef struct {
    unsigned int grid[3], block[3], smem;
    void* stream;
    kp_attr* attrs;
    unsigned int nattrs;
} kp_config;
_Static_assert(sizeof(kp_attr) == 72, "CUlaunchAttribute layout");
_Static_assert(sizeof(kp_config) == 56 && offsetof(kp_config, stream) == 32, "CUlaunchConfig layout");

static CUresult (*cu_ctx_get)(void**);
static CUresult (*cu_ctx_set)(void*);
static CUresult (*cu_launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                             void**);
static CUresult (*cu_launch_ex)(const kp_config*, void*, void**, void**);
static CUresult (*cu_error_name)(CUresult, const char**);
static CUresult (*cu_tmap_encode)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*, const uint32_t*,
                                  const uint32_t*, int, int, int, int); /* cuTensorMapEncodeTiled; NULL: Python */
static CUresult (*cu_param_info)(void*, size_t, size_t*, size_t*); /* cuKernelGetParamInfo (12.4); NULL: none */
/* a tensor list's descriptors copied per launch (cuMemAllocAsync, cuMemcpyHtoDAsync, cuMemFreeAsync); NULL: such
 * launches take the Python path, which says what the driver lacks */
static CUresult (*cu_alloc_async)(uint64_t*, size_t, void*);
static CUresult (*cu_copy_async)(uint64_t, const void*, size_t, void*);
static CUresult (*cu_free_async)(uint64_t, void*);
static int driver_version;        /* cuDriverGetVersion: the bit-21 fixup of old drivers (kernelpack.core.tma) */
static uint64_t driver_gen = 1;   /* bumped by set_driver: encoded tensor maps of another driver are stale */

static const kp_bridge* bridge;   /* torch tensors readable in C when set */
static int one_device;            /* exactly one visible device: launches make no context query (see launch()) */
static int release_gil = 1;       /* set_release_gil(False): keep it (single-threaded callers; measurement) */
static PyObject* stream_getter;   /* Python fallback for torch's current stream: f(device) -> int */
static PyObject* s_grid, *s_block, *s_smem, *s_stream, *s_cluster, *s_cuda_stream, *s_repr;

/* Keywords: the launch options (K_GRID..K_CLUSTER) and parameters by name (K_N + the parameter's position). A call
 * site passes the same kwnames tuple (a constant of its code object) every time, so each family keeps the last one
 * seen with its mapping; the tuple is held, so its address cannot be reused. */
enum { K_GRID, K_BLOCK, K_SMEM, K_STREAM, K_CLUSTER, K_N };
#define KP_MAX_KW (K_N + KP_MAX_SLOTS)

/* ------------------------------------------------------------------ plans and device tables */

/* A slot's common case, packed without the general fit_slot when the argument is the plain one (else fit_slot
 * decides): a pointer param given a contiguous tensor on the launch device, an int32/int64 param without divisor
 * or range given an int, a float param given a float. */
enum { F_GENERAL = 0, F_PTR, F_I32, F_I64, F_F32 };

typedef struct {
    uint8_t op;
    uint8_t fop; /* F_*: the slot's fast case */
    int8_t dtype;
    int8_t rank, shape_dt, stride_dt;
    int8_t dev; /* KP_OP_DEVICE: which of the chosen entry's device values */
    int8_t apow2, dpow2; /* align / divisor is a power of two (a mask test, no division) */
    uint32_t kmask, kwant; /* F_PTR: view_key(v) & kmask == kwant | device for a tensor it takes (dtype, contiguous) */
    int16_t arg;
    uint32_t offset, size, align, data_off;
    int64_t divisor;
    int8_t nranges; /* range constraints (kernelpack.launch.ranges), in x */
    struct kp_slot_x* x; /* a tensor slot's modes, a slot's ranges: NULL when it has neither (owned by the family) */
    /* KP_OP_DESC / KP_OP_DESC_FIELD: a tensor descriptor (kernelpack.core.tma.TensorDescSpec) of rank `rank`, element
     * type `dtype`; tma: the encoding facts (CUtensorMapDataType, element size, swizzle, fp4 padding, box outermost
     * first); the field's place in the params the descriptor fills (pos 0 is the map, or the decomposed pointer) */
    int8_t tma, fp4, swizzle, elem_size;
    int8_t field; /* KP_OP_DESC_FIELD: 0 extent `pos`, 1 stride `pos`, 2 a flag (always 0 here) */
    int32_t elem_type, pos;
    uint32_t box[KP_MAX_TMA_RANK];
} kp_slot;

/* What few slots need, out of line so that a plan's slots stay small (a family's plans copy them): a tensor's static
 * modes and where its run-time ones go; range constraints lo <= x <= hi, x the integer (mode -1) or extent `mode`.
 * Slots parsed once and copied into several plans share theirs. */
typedef struct kp_slot_x {
    int64_t shape[KP_MAX_RANK], stride[KP_MAX_RANK];
    int32_t shape_off[KP_MAX_RANK], stride_off[KP_MAX_RANK];
    int8_t rmode[KP_MAX_RANK + 1];
    int64_t rlo[KP_MAX_RANK + 1], rhi[KP_MAX_RANK + 1];
    /* KP_OP_LIST: what each tensor of the list must be (kernelpack.core.abi.TensorList) besides its dtype, rank and
     * static modes (shape, stride above) and alignment (the slot's align): every extent and stride in [lo, hi] (the
     * index type), multiples of sdiv / tdiv, strides at least tmin (KP_DYN: any) */
    int64_t lo, hi, sdiv[KP_MAX_RANK], tdiv[KP_MAX_RANK], tmin[KP_MAX_RANK];
} kp_slot_x;

/* One step of a grid formula (LaunchSpec.grid) in postfix order: push a constant, push an integer read from the
 * packed parameters (offset, dtype), or combine the top two values. */
#define KP_GRID_STACK 16
typedef struct {
    uint8_t op;
    int8_t dtype;
    int64_t v; /* KP_G_CONST: the value; KP_G_LOAD: the offset in the parameter buffer */
} kp_gop;

typedef struct {
    int nslots, ok; /* ok: every slot can be packed here (else such a launch takes the Python path) */
    int covers;     /* every caller argument is some slot's (else the others are checked after dispatch) */
    int grid;       /* 1: a grid formula the C path evaluates; -1: one it cannot (Python path); 0: none */
    int glen[3];
    int ndev;       /* device-derived params (KP_OP_DEVICE): each entry carries their values */
    int nlists;     /* tensor lists (KP_OP_LIST): their descriptors are copied to the device per launch */
    kp_slot* slots;
    kp_gop* gcode; /* the three formulas one after the other */
    PyObject* label;
} kp_plan;

typedef struct {
    int plan; /* the plan of the binary chosen for the device (a specialization has one per parameter layout) */
    void* kernel;
    uint32_t fixed_block[3], reqntid[3], max_threads, cluster[3], spec_cluster[3], static_smem, dyn_smem, smem_raised;
    int64_t dv[KP_MAX_DEVICE_VALUES]; /* the values of the plan's device-derived params on this device */
    int pdl; /* launched with programmatic dependent launch (LaunchSpec.pdl; a cooperative kernel is never here) */
} kp_entry;

typedef struct {
    void* ctx;
    uint32_t max_grid[3], max_block[3], max_threads, smem_optin;
    int cluster_ok, n;
    kp_entry* e;
} kp_dev;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* dict;
    PyObject* weakrefs;
    PyObject* slow;
    PyObject* load; /* load(device, entry) -> bool: loads an entry published as not loaded yet (kernel NULL) */
    PyObject* names;   /* the parameters' names (interned str), in order: parameters passed by keyword */
    PyObject* kw_last; /* the last kwnames tuple seen, mapped in kw_map (kw_n entries) */
    int kw_n;
    int8_t kw_map[KP_MAX_KW];
    int nargs, nplan;
    kp_plan* plans;
    uint8_t dims[KP_MAX_SLOTS]; /* per argument: 1 when some plan packs it as a tensor descriptor (shape, strides) */
    /* the arguments read through the torch bridge at every launch (ascending): those some plan reads as a pointer,
     * tensor or tensor descriptor, or leaves unread; the others only ever fill scalar or bytes params */
    uint8_t cand[KP_MAX_SLOTS], which[KP_MAX_SLOTS];
    int ncand;
    kp_dev* devs[KP_MAX_DEVICES];
    struct kp_tmap* tmaps; /* KP_TMAP_CACHE encoded tensor maps, allocated on the first TMA launch */
    uint64_t tmap_clock;   /* stamps for least-recently-used replacement */
    kp_slot_x** xs;        /* every slot's out-of-line part (slot_x), freed with the family */
    int nxs, capxs;
    int has_lists;         /* some plan takes a tensor list: its calls read lists (kp_lcall) */
} kp_family;

/* One encoded CUtensorMap: a pure function of the descriptor slot (its encoding facts), the tensor's address,
 * shape and strides, and the driver (its version decides the bit-21 fixup). */
typedef struct kp_tmap {
    uint64_t map[16];
    const kp_slot* slot; /* NULL: unused */
    uint64_t ptr, gen, used;
    int64_t shape[KP_MAX_TMA_RANK], stride[KP_MAX_TMA_RANK];
} kp_tmap;

static PyTypeObject* FamilyType;

/* ------------------------------------------------------------------ one launch, and what a prepared one keeps */

/* The tensors of a launch's list arguments, each list read (through the torch bridge) when a slot first takes it:
 * argument i's tensors are v[first[i] .. first[i] + count[i]) (first -1: not read yet). Heap memory of the call, made
 * only for families that take lists; the views point into the tensors, which the lists hold for the call. */
typedef struct {
    int nv;
    int16_t first[KP_MAX_SLOTS];
    int16_t count[KP_MAX_SLOTS];
    kp_view v[KP_LIST_VIEWS];
} kp_lcall;

/* What a launch knows of its arguments: the views of the arguments that may be tensors, read through the torch
 * bridge in one call before dispatch; each slot reads its own int, float or bool argument as it packs it. No copy of
 * the arguments is made. */
typedef struct {
    PyObject* const* args;
    int nargs;
    int device;   /* the launch device: every tensor must be on it */
    int ntensors; /* torch tensors among the arguments */
    kp_lcall* lc; /* the list arguments' tensors (NULL: the family takes no list) */
    kp_view v[KP_MAX_SLOTS];
} kp_call;

/* What a call resolved, kept by a prepared launch (Family.prepare): everything but the stream, and the views of the
 * arguments that may be tensors, so a later call re-reads only those and compares (a tensor whose data pointer,
 * device, dtype or contiguity changed is resolved again). */
typedef struct {
    int ok;      /* 1: resolved on the fast path; 0: the Python path decides every call */
    int empty;   /* a grid rule gave a dimension <= 0: nothing to launch */
    int recheck; /* 1: some argument is packed with its shape (tensor struct, descriptor): resolve every call */
    int device, pdl, ntensors, nt;
    uint64_t gen; /* driver_gen when resolved */
    void *ctx, *kernel;
    const kp_plan* plan;
    uint32_t g[3], b[3], c[3], smem;
    PyObject* argv[KP_MAX_SLOTS]; /* the parameters in order (borrowed from the prepared launch's own references) */
    uint8_t which[KP_MAX_SLOTS];  /* the arguments that may be tensors, and their views when resolved */
    kp_view v[KP_MAX_SLOTS];
    void* ptrs[KP_MAX_SLOTS];
    unsigned char buf[KP_BUF] __attribute__((aligned(16)));
} kp_capture;

/* ------------------------------------------------------------------ declared here, defined in a later part */

static int get_i64s(PyObject* t, int64_t* out, int n, const char* what); /* _launch_family.c */
static int is_tuple(PyObject* t, const char* what);                       /* _launch_family.c */

#endif
