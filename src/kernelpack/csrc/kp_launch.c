/* kernelpack C runtime, part 3: the launch path (block, cluster, shared memory, Triton scratch), the values of
 * device-derived parameters and the helpers dispatching family entries use. Pasted into every generated translation
 * unit after part 2 (kp_runtime.c).
 *
 * A launch uses the facts of the binary the device state chose (kernelpack.launch.facts): the cubin's (kp_bins) and
 * its arch's LaunchSpec (kp_launches), both indexed by that binary.
 */

/* ------------------------------------------------------------------ launch */

static int kp_dims_zero(const uint32_t v[3]) { return v[0] == 0 && v[1] == 0 && v[2] == 0; }
static void kp_dims_norm(const uint32_t in[3], uint32_t out[3]) {
    out[0] = in[0] ? in[0] : 1, out[1] = in[1] ? in[1] : 1, out[2] = in[2] ? in[2] : 1;
}
static int kp_dims_eq(const uint32_t a[3], const uint32_t b[3]) { return a[0] == b[0] && a[1] == b[1] && a[2] == b[2]; }

/* Block shape: the caller's, checked against what the kernel requires; or the kernel's fixed one. {0,0,0} asks
 * for the fixed one; otherwise x must be set and y, z of 0 mean 1 (as for the grid): {0,5,0} is refused, never
 * launched as {1,5,1}. */
static kp_status kp_block(const kp_ctx* c, uint32_t spec, const kp_bin_info* bi, const kp_bin_launch* bl,
                          const kp_launch* l, uint32_t block[3]) {
    const kp_spec_info* sp = &kp_specs[spec];
    const uint32_t* fixed = bl->block[0] ? bl->block : bi->reqntid[0] ? bi->reqntid : NULL;
    if (l->block[0] == 0) {
        if (KP_UNLIKELY(l->block[1] || l->block[2]))
            return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block {0,%u,%u} has x = 0 but y or z set; "
                           "set x too (y and z of 0 mean 1), or pass {0,0,0} for the kernel's fixed block", c->fn,
                           KP_STR(sp->label), l->block[1], l->block[2]);
        if (fixed == NULL)
            return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block is {0,0,0} and the kernel fixes no "
                           "block shape; set launch.block", c->fn, KP_STR(sp->label));
        block[0] = fixed[0], block[1] = fixed[1], block[2] = fixed[2];
        return KP_SUCCESS;
    }
    kp_dims_norm(l->block, block);
    if (bi->reqntid[0] && !kp_dims_eq(block, bi->reqntid))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s (sm_%d%d%s): launch.block {%u,%u,%u} differs from the "
                       "block the kernel requires (REQNTID) {%u,%u,%u}; pass {0,0,0} to use it", c->fn, KP_STR(sp->label),
                       bi->major, bi->minor, bi->suffix == 'a' ? "a" : "", block[0], block[1], block[2],
                       bi->reqntid[0], bi->reqntid[1], bi->reqntid[2]);
    if (bl->block[0] && !kp_dims_eq(block, bl->block))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s (sm_%d%d%s): launch.block {%u,%u,%u} differs from the "
                       "kernel's fixed block {%u,%u,%u}; pass {0,0,0} to use it", c->fn, KP_STR(sp->label), bi->major,
                       bi->minor, bi->suffix == 'a' ? "a" : "", block[0], block[1], block[2], bl->block[0],
                       bl->block[1], bl->block[2]);
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (KP_UNLIKELY(block[0] > KP_MAX_BLOCK_X || block[1] > KP_MAX_BLOCK_Y || block[2] > KP_MAX_BLOCK_Z ||
                    threads > KP_MAX_BLOCK_THREADS))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block {%u,%u,%u} exceeds the device limits (x at "
                       "most %u, y %u, z %u, %u threads)", c->fn, KP_STR(sp->label), block[0], block[1], block[2],
                       KP_MAX_BLOCK_X, KP_MAX_BLOCK_Y, KP_MAX_BLOCK_Z, KP_MAX_BLOCK_THREADS);
    if (bi->max_threads && threads > bi->max_threads)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block {%u,%u,%u} has %llu threads, the "
                       "kernel allows at most %u (__launch_bounds__)", c->fn, KP_STR(sp->label), block[0], block[1], block[2],
                       (unsigned long long)threads, (unsigned)bi->max_threads);
    return KP_SUCCESS;
}

/* Cluster shape to request (out all 0 = no cluster attribute): the cubin's explicit one is implied. */
static kp_status kp_cluster(const kp_ctx* c, uint32_t spec, const kp_bin_info* bi, const kp_bin_launch* bl,
                            const kp_launch* l, const uint32_t grid[3], uint32_t out[3]) {
    const kp_spec_info* sp = &kp_specs[spec];
    uint32_t want[3] = {0, 0, 0}, check[3];
    if (!kp_dims_zero(l->cluster)) {
        if (l->cluster[0] == 0)
            return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.cluster {0,%u,%u} has x = 0 but y or z set; "
                           "set x too (y and z of 0 mean 1), or pass {0,0,0} for the kernel's own cluster", c->fn,
                           KP_STR(sp->label), l->cluster[1], l->cluster[2]);
        kp_dims_norm(l->cluster, want);
    }
    uint32_t bin_cluster[3] = {bi->cluster[0], bi->cluster[1], bi->cluster[2]};
    const uint32_t* fixed = bi->cluster[0] ? bin_cluster : bl->cluster[0] ? bl->cluster : NULL;
    if (fixed != NULL && want[0] && !kp_dims_eq(want, fixed))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.cluster {%u,%u,%u} differs from the kernel's "
                       "%s cluster {%u,%u,%u}; pass {0,0,0} to use it", c->fn, KP_STR(sp->label), want[0], want[1], want[2],
                       bi->cluster[0] ? "compile-time" : "fixed", fixed[0], fixed[1], fixed[2]);
    if (fixed != NULL) memcpy(want, fixed, sizeof want);
    memset(out, 0, 3 * sizeof(uint32_t));
    if (want[0] == 0) return KP_SUCCESS;
    if (!c->d->cluster_ok)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: thread block clusters need compute capability 9.0 or "
                       "newer; device %d is sm_%d%d", c->fn, KP_STR(sp->label), c->d->ordinal, c->d->major, c->d->minor);
    kp_dims_norm(want, check);
    uint64_t size = (uint64_t)check[0] * check[1] * check[2];
    if (size > KP_MAX_PORTABLE_CLUSTER)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: cluster {%u,%u,%u} has %llu blocks; at most %u (the "
                       "portable cluster size) are allowed", c->fn, KP_STR(sp->label), check[0], check[1], check[2],
                       (unsigned long long)size, KP_MAX_PORTABLE_CLUSTER);
    if (grid[0] % check[0] || grid[1] % check[1] || grid[2] % check[2])
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.grid {%u,%u,%u} is not a multiple of the "
                       "cluster {%u,%u,%u}", c->fn, KP_STR(sp->label), grid[0], grid[1], grid[2], check[0], check[1],
                       check[2]);
    if (!bi->cluster[0]) memcpy(out, check, sizeof check); /* explicit clusters must not be requested again */
    return KP_SUCCESS;
}

/* Raise the dynamic shared memory limit of a kernel on a device above 48 KiB, once per new maximum. */
static kp_status kp_smem(const kp_ctx* c, uint32_t spec, const kp_bin_info* bi, kp_CUkernel k, uint32_t smem) {
    if (smem <= KP_SMEM_DEFAULT_LIMIT || smem <= KP_LOAD(c->d->smem_raised[spec])) return KP_SUCCESS;
    const char* label = KP_STR(kp_specs[spec].label);
    if ((uint64_t)smem + bi->static_smem > (uint64_t)c->d->smem_optin)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.dynamic_smem %u + static %u bytes exceed the "
                       "%d bytes of shared memory per block device %d allows", c->fn, label, smem, bi->static_smem,
                       c->d->smem_optin, c->d->ordinal);
    kp_CUresult r = kp_cu.KernelSetAttribute(KP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem, k, c->dev);
    if (r != KP_CUDA_SUCCESS) return kp_cuda_fail(r, c->fn, label, "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE)");
    uint32_t old = KP_LOAD(c->d->smem_raised[spec]);
    while (old < smem && !__atomic_compare_exchange_n(&c->d->smem_raised[spec], &old, smem, 1, __ATOMIC_RELEASE,
                                                      __ATOMIC_ACQUIRE)) {
    }
    return KP_SUCCESS;
}

/* The launch flags of one launch (*flags: the kernel's own on entry): the caller's KP_LAUNCH_* bits added (or PDL
 * taken away), PDL refused below compute capability 9.0, a cooperative grid refused unless all its blocks can be
 * resident at once (cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs), as the driver would refuse it later. */
static kp_status kp_launch_flags(const kp_ctx* c, uint32_t spec, const kp_bin_launch* bl, const kp_launch* l,
                                 const uint32_t grid[3], const uint32_t block[3], uint32_t smem, kp_CUkernel k,
                                 uint32_t* flags) {
    const char* label = KP_STR(kp_specs[spec].label);
    const uint32_t known = KP_LF_PDL | KP_LF_NO_PDL | KP_LF_COOPERATIVE;
    if (l->flags & ~known)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.flags 0x%x has bits no KP_LAUNCH_* flag names "
                       "(known: 0x%x)", c->fn, label, l->flags, known);
    if ((l->flags & KP_LF_PDL) && (l->flags & KP_LF_NO_PDL))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.flags sets both KP_LAUNCH_PDL and "
                       "KP_LAUNCH_NO_PDL", c->fn, label);
    uint32_t f = (bl->flags | (l->flags & (KP_LF_PDL | KP_LF_COOPERATIVE))) & ~(l->flags & KP_LF_NO_PDL ? KP_LF_PDL : 0u);
    int own = (bl->flags & KP_LF_PDL) && !(l->flags & KP_LF_PDL);
    if ((f & KP_LF_PDL) && c->d->major < KP_PDL_MIN_MAJOR)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: programmatic dependent launch (PDL%s) needs compute "
                       "capability %d.0 or newer; device %d is sm_%d%d%s", c->fn, label,
                       own ? ", the kernel's launch flag" : "", KP_PDL_MIN_MAJOR, c->d->ordinal, c->d->major,
                       c->d->minor, own ? " (pass KP_LAUNCH_NO_PDL to launch without)" : "");
    if (f & KP_LF_COOPERATIVE) {
        if (!c->d->coop_ok)
            return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: device %d (sm_%d%d) does not support cooperative "
                           "launches", c->fn, label, c->d->ordinal, c->d->major, c->d->minor);
        if (kp_cu.OccupancyMaxActiveBlocksPerMultiprocessor == NULL)
            return kp_fail(KP_ERROR_DRIVER_TOO_OLD, "%s: kernel %s: a cooperative launch needs "
                           "cuOccupancyMaxActiveBlocksPerMultiprocessor, which this CUDA driver does not provide", c->fn,
                           label);
        int per_sm = 0;
        uint32_t threads = block[0] * block[1] * block[2];
        kp_status s = KP_SUCCESS;
        kp_CUresult r = kp_cu.OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (kp_CUfunction)k, (int)threads,
                                                                        (size_t)smem);
        int rebound = r != KP_CUDA_SUCCESS ? kp_rebind(c, l, r, &s) : 0; /* no current context yet: bind it */
        if (rebound > 0)
            r = kp_cu.OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (kp_CUfunction)k, (int)threads, (size_t)smem);
        if (r != KP_CUDA_SUCCESS)
            return rebound < 0 ? s : kp_cuda_fail(r, c->fn, label, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        uint64_t total = (uint64_t)grid[0] * grid[1] * grid[2], most = (uint64_t)(per_sm > 0 ? per_sm : 0) *
                         (uint64_t)(c->d->sm_count > 0 ? c->d->sm_count : 0);
        if (total > most)
            return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: cooperative launch of grid {%u,%u,%u} (%llu blocks "
                           "of %u threads, %u bytes of dynamic shared memory) exceeds the %llu blocks that can be "
                           "co-resident on device %d (sm_%d%d): %d per SM x %d SMs", c->fn, label, grid[0], grid[1],
                           grid[2], (unsigned long long)total, threads, smem, (unsigned long long)most, c->d->ordinal,
                           c->d->major, c->d->minor, per_sm, c->d->sm_count);
    }
    *flags = f;
    return KP_SUCCESS;
}

/* Launch specialization spec on the resolved device with its packed parameter pointers. */
static kp_status kp_run(const kp_ctx* c, uint32_t spec, const kp_launch* l, void** args) {
    int32_t b = c->d->sel[spec];
    if (KP_UNLIKELY(b < 0)) return kp_no_binary(c, spec);
    const kp_bin_info* bi = &kp_bins[b];
    const kp_bin_launch* bl = &kp_launches[b];
    const kp_spec_info* sp = &kp_specs[spec];
    kp_CUkernel k;
    kp_status s = kp_kernel_get(c->fn, spec, (uint32_t)b, &k);
    if (KP_UNLIKELY(s != KP_SUCCESS)) return s;
    uint32_t grid[3], block[3] = {0, 0, 0}, cluster[3] = {0, 0, 0};
    if (KP_UNLIKELY(l->grid[0] == 0))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.grid[0] is 0", c->fn, KP_STR(sp->label));
    kp_dims_norm(l->grid, grid);
    if (KP_UNLIKELY(grid[0] > KP_MAX_GRID_X || grid[1] > KP_MAX_GRID_Y || grid[2] > KP_MAX_GRID_Z))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.grid {%u,%u,%u} exceeds the device limits "
                       "{%u,%u,%u}", c->fn, KP_STR(sp->label), grid[0], grid[1], grid[2], KP_MAX_GRID_X, KP_MAX_GRID_Y,
                       KP_MAX_GRID_Z);
    if (KP_UNLIKELY((s = kp_block(c, spec, bi, bl, l, block)) != KP_SUCCESS)) return s;
    uint32_t smem = l->dynamic_smem ? l->dynamic_smem : bl->dyn_smem;
    if (KP_UNLIKELY(smem < bl->dyn_smem))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s (sm_%d%d%s): launch.dynamic_smem %u is less than the %u "
                       "bytes the kernel needs; pass 0 to use that", c->fn, KP_STR(sp->label), bi->major, bi->minor,
                       bi->suffix == 'a' ? "a" : "", smem, bl->dyn_smem);
    if (KP_UNLIKELY((s = kp_smem(c, spec, bi, k, smem)) != KP_SUCCESS)) return s;
    if (KP_UNLIKELY(bi->cluster[0] || bl->cluster[0] || !kp_dims_zero(l->cluster))) {
        if ((s = kp_cluster(c, spec, bi, bl, l, grid, cluster)) != KP_SUCCESS) return s;
    }
    uint32_t flags = bl->flags;
    if (KP_UNLIKELY(flags | l->flags)) {
        if ((s = kp_launch_flags(c, spec, bl, l, grid, block, smem, k, &flags)) != KP_SUCCESS) return s;
    }
    kp_CUlaunchAttribute attrs[3];
    unsigned nattrs = 0;
    if (KP_UNLIKELY(cluster[0] || flags)) {
        memset(attrs, 0, sizeof attrs);
        if (cluster[0]) {
            attrs[nattrs].id = KP_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attrs[nattrs].value.clusterDim.x = cluster[0], attrs[nattrs].value.clusterDim.y = cluster[1];
            attrs[nattrs++].value.clusterDim.z = cluster[2];
        }
        if (flags & KP_LF_PDL) {
            attrs[nattrs].id = KP_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[nattrs++].value.i = 1;
        }
        if (flags & KP_LF_COOPERATIVE) {
            attrs[nattrs].id = KP_CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[nattrs++].value.i = 1;
        }
    }
    const char* call = nattrs ? "cuLaunchKernelEx" : "cuLaunchKernel";
    kp_CUresult r;
    int retried = 0, rebound = 0;
    if (KP_UNLIKELY(kp_cu.DryrunNote != NULL)) kp_cu.DryrunNote(KP_STR(sp->label)); /* a dry run records it */
    do {
        if (nattrs == 0) {
            r = kp_cu.LaunchKernel((kp_CUfunction)k, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                                   (kp_CUstream)l->stream, args, NULL);
        } else {
            kp_CUlaunchConfig cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.gridDimX = grid[0], cfg.gridDimY = grid[1], cfg.gridDimZ = grid[2];
            cfg.blockDimX = block[0], cfg.blockDimY = block[1], cfg.blockDimZ = block[2];
            cfg.sharedMemBytes = smem;
            cfg.hStream = (kp_CUstream)l->stream;
            cfg.attrs = attrs;
            cfg.numAttrs = nattrs;
            r = kp_cu.LaunchKernelEx(&cfg, (kp_CUfunction)k, args, NULL);
        }
    } while (KP_UNLIKELY(r != KP_CUDA_SUCCESS) && !retried++ && (rebound = kp_rebind(c, l, r, &s)) > 0);
    if (KP_UNLIKELY(r != KP_CUDA_SUCCESS)) return rebound < 0 ? s : kp_cuda_fail(r, c->fn, KP_STR(sp->label), call);
    return KP_SUCCESS;
}

/* max_active_clusters:n for specialization spec on the resolved device (kernelpack.launch.device): asked of the
 * driver once per device and specialization, as CuTe's HardwareInfo().get_max_active_clusters(n) does -- clusters of
 * n x 1 x 1 blocks, a grid of one cluster, the kernel's fixed block (KP_MAC_BLOCK threads when it fixes none), and
 * all the dynamic shared memory a block can have (the kernel's limit raised to it), so one block fills an SM. */
static KP_UNUSED kp_status kp_max_active_clusters(const kp_ctx* c, uint32_t spec, const kp_launch* l, uint32_t n,
                                                  int32_t* out) {
    int32_t v = KP_LOAD(c->d->mac[spec]);
    if (KP_LIKELY(v > 0)) {
        *out = v;
        return KP_SUCCESS;
    }
    const char* label = KP_STR(kp_specs[spec].label);
    int32_t b = c->d->sel[spec];
    if (b < 0) return kp_no_binary(c, spec);
    const kp_bin_info* bi = &kp_bins[b];
    const kp_bin_launch* bl = &kp_launches[b];
    kp_CUkernel k;
    kp_status s = kp_kernel_get(c->fn, spec, (uint32_t)b, &k);
    if (s != KP_SUCCESS) return s;
    if (kp_cu.OccupancyMaxActiveClusters == NULL)
        return kp_fail(KP_ERROR_DRIVER_TOO_OLD, "%s: kernel %s: its max_active_clusters parameter needs "
                       "cuOccupancyMaxActiveClusters, which this CUDA driver does not provide (CUDA 11.8+)", c->fn,
                       label);
    uint32_t smem = kp_mac_smem(c->d->smem_optin, bi->static_smem);
    if ((s = kp_smem(c, spec, bi, k, smem)) != KP_SUCCESS) return s;
    const uint32_t* fixed = bl->block[0] ? bl->block : bi->reqntid[0] ? bi->reqntid : NULL;
    kp_CUlaunchAttribute attr;
    kp_CUlaunchConfig cfg;
    memset(&attr, 0, sizeof attr);
    memset(&cfg, 0, sizeof cfg);
    attr.id = KP_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = n, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
    cfg.gridDimX = n, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = fixed ? fixed[0] : KP_MAC_BLOCK, cfg.blockDimY = fixed ? fixed[1] : 1;
    cfg.blockDimZ = fixed ? fixed[2] : 1;
    cfg.sharedMemBytes = smem;
    cfg.hStream = (kp_CUstream)l->stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int found = 0;
    kp_CUresult r = kp_cu.OccupancyMaxActiveClusters(&found, (kp_CUfunction)k, &cfg);
    int rebound = r != KP_CUDA_SUCCESS ? kp_rebind(c, l, r, &s) : 0;
    if (rebound > 0) r = kp_cu.OccupancyMaxActiveClusters(&found, (kp_CUfunction)k, &cfg);
    if (r != KP_CUDA_SUCCESS) return rebound < 0 ? s : kp_cuda_fail(r, c->fn, label, "cuOccupancyMaxActiveClusters");
    if (found < 1)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: no cluster of %u blocks fits on device %d "
                       "(cuOccupancyMaxActiveClusters gave %d) for its max_active_clusters parameter", c->fn, label, n,
                       c->d->ordinal, found);
    KP_STORE(c->d->mac[spec], (int32_t)found);
    *out = found;
    return KP_SUCCESS;
}

#if KP_SCRATCH
/* Launch a kernel that takes Triton scratch buffers: size x CTAs bytes each (0 = NULL), allocated on the launch
 * stream for this launch only (cuMemAllocAsync, freed with cuMemFreeAsync after it), aligned as the kernel needs;
 * the pointers go to *gptr / *pptr, which args refer to. */
static kp_status kp_run_scratch(const kp_ctx* c, uint32_t spec, const kp_launch* l, void** args, uint32_t gsize,
                                uint32_t galign, void** gptr, uint32_t psize, uint32_t palign, void** pptr) {
    const char* label = KP_STR(kp_specs[spec].label);
    if (l->grid[0] == 0) return kp_run(c, spec, l, args); /* reports the empty grid */
    uint32_t g[3];
    kp_dims_norm(l->grid, g);
    uint64_t ctas = (uint64_t)g[0] * g[1], gbytes, pbytes, poff, total;
    uint64_t align = galign > palign ? galign : palign;
    if (__builtin_mul_overflow(ctas, (uint64_t)g[2], &ctas) || __builtin_mul_overflow(ctas, (uint64_t)gsize, &gbytes) ||
        __builtin_mul_overflow(ctas, (uint64_t)psize, &pbytes) || gbytes > UINT64_MAX / 2 || pbytes > UINT64_MAX / 4)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: scratch for grid {%u,%u,%u} overflows 64 bits", c->fn,
                       label, g[0], g[1], g[2]);
    poff = (gbytes + palign - 1) / palign * palign;
    total = poff + pbytes + (align > 256 ? align : 0); /* the driver's pools align to 256 bytes */
    if (kp_cu.MemAllocAsync == NULL || kp_cu.MemFreeAsync == NULL)
        return kp_fail(KP_ERROR_DRIVER_TOO_OLD, "%s: kernel %s needs %llu bytes of scratch per launch, allocated with "
                       "cuMemAllocAsync/cuMemFreeAsync, which this CUDA driver does not provide (CUDA 11.2+)", c->fn,
                       label, (unsigned long long)total);
    kp_CUdeviceptr base = 0;
    kp_status s = KP_SUCCESS;
    kp_CUresult r = kp_cu.MemAllocAsync(&base, (size_t)total, (kp_CUstream)l->stream);
    int rebound = r != KP_CUDA_SUCCESS ? kp_rebind(c, l, r, &s) : 0;
    if (rebound > 0) r = kp_cu.MemAllocAsync(&base, (size_t)total, (kp_CUstream)l->stream);
    if (r != KP_CUDA_SUCCESS) return rebound < 0 ? s : kp_cuda_fail(r, c->fn, label, "cuMemAllocAsync (scratch)");
    uint64_t start = align > 256 ? (base + align - 1) / align * align : base;
    *gptr = gsize ? (void*)(uintptr_t)start : NULL;
    *pptr = psize ? (void*)(uintptr_t)(start + poff) : NULL;
    s = kp_run(c, spec, l, args);
    r = kp_cu.MemFreeAsync(base, (kp_CUstream)l->stream);
    if (r != KP_CUDA_SUCCESS && s == KP_SUCCESS) s = kp_cuda_fail(r, c->fn, label, "cuMemFreeAsync (scratch)");
    return s;
}
#endif

/* ------------------------------------------------------------------ dispatch helpers */

static const char* const kp_dtype_names[] = KP_DTYPE_NAMES;
static const char* kp_dtype_name(int dt) {
    return dt >= 0 && dt < (int)(sizeof kp_dtype_names / sizeof kp_dtype_names[0]) ? kp_dtype_names[dt] : "invalid";
}

static KP_UNUSED uint64_t kp_align_of(const void* p) {
    uintptr_t a = (uintptr_t)p;
    return a == 0 ? 256 : (uint64_t)(a & (~a + 1)) > 256 ? 256 : (uint64_t)(a & (~a + 1));
}

/* A kp_tensor filled in wrongly -- an element type that is no kp_dtype, a rank outside [0, KP_MAX_RANK], a negative
 * extent -- is refused before dispatch (KP_ERROR_INVALID_ARGUMENT), as the runtime refuses such an array. */
static KP_UNUSED kp_status kp_tensor_valid(const char* fn, const char* name, const kp_tensor* t) {
    if ((int)t->dtype < 0 || (int)t->dtype >= KP_DTYPE_COUNT)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s': dtype %d is not a kp_dtype", fn, name,
                       (int)t->dtype);
    if (t->rank < 0 || t->rank > KP_MAX_RANK)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s': rank %d is outside [0, %d]", fn, name,
                       (int)t->rank, KP_MAX_RANK);
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 0)
            return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s': shape[%d] = %lld is negative: extents must be "
                           ">= 0", fn, name, i, (long long)t->shape[i]);
    return KP_SUCCESS;
}

/* Does tensor t fit a specialization's tensor spec: dtype, rank, static modes, alignment, index ranges (extents
 * never below 0; strides in the stride field's range, negative ones too where it is signed)? */
static KP_UNUSED int kp_tensor_fits(const kp_tensor* t, int dtype, int rank, const int64_t* shape, const int64_t* stride,
                          uint64_t align, int64_t shape_min, int64_t shape_max, int64_t stride_min,
                          int64_t stride_max) {
    if ((int)t->dtype != dtype || t->rank != rank || (uintptr_t)t->data % align) return 0;
    if (shape_min < 0) shape_min = 0; /* a negative extent is no tensor, whatever the shape field's type */
    for (int i = 0; i < rank; i++) {
        if (shape[i] == KP_DYN ? t->shape[i] < shape_min || t->shape[i] > shape_max : t->shape[i] != shape[i])
            return 0;
        if (stride[i] == KP_DYN ? t->stride[i] < stride_min || t->stride[i] > stride_max : t->stride[i] != stride[i])
            return 0;
    }
    return 1;
}

/* A bounded string builder for dispatch messages. */
typedef struct kp_sb {
    char* buf;
    size_t cap, len;
} kp_sb;

static KP_UNUSED void kp_sb_add(kp_sb* sb, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static KP_UNUSED void kp_sb_add(kp_sb* sb, const char* fmt, ...) {
    if (sb->len + 1 >= sb->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    if (n > 0) sb->len = sb->len + (size_t)n < sb->cap ? sb->len + (size_t)n : sb->cap - 1;
}

static KP_UNUSED void kp_describe_ptr(kp_sb* sb, const char* name, const void* p, int dtype) {
    kp_sb_add(sb, "%s: %s%s%p (%llu-byte aligned)", name, dtype >= 0 ? kp_dtype_name(dtype) : "",
              dtype >= 0 ? " pointer " : "pointer ", p, (unsigned long long)kp_align_of(p));
}

static KP_UNUSED void kp_describe_int(kp_sb* sb, const char* name, long long v) {
    long long d = 1;
    while (d < 256 && v != 0 && v % (d * 2) == 0) d *= 2;
    kp_sb_add(sb, "%s = %lld (divisible by %lld)", name, v, v == 0 ? 256LL : d);
}

static KP_UNUSED void kp_describe_tensor(kp_sb* sb, const char* name, const kp_tensor* t) {
    if (t == NULL) {
        kp_sb_add(sb, "%s: NULL", name);
        return;
    }
    kp_sb_add(sb, "%s: %s tensor rank %d shape [", name, kp_dtype_name(t->dtype), t->rank);
    for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) kp_sb_add(sb, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    kp_sb_add(sb, "] stride [");
    for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) kp_sb_add(sb, i ? ", %lld" : "%lld", (long long)t->stride[i]);
    kp_sb_add(sb, "] data %p (%llu-byte aligned)", t->data, (unsigned long long)kp_align_of(t->data));
    for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) {
        if (t->shape[i] < 0) {
            kp_sb_add(sb, " (shape[%d] = %lld is negative: extents must be >= 0)", i, (long long)t->shape[i]);
            break;
        }
    }
}

/* The end of a failed dispatch: no specialization fits (or one fits but carries no binary for the device). */
static KP_UNUSED kp_status kp_no_match(const kp_ctx* c, kp_sb* sb, int constraint_match, const char* carried) {
    kp_sb_add(sb, ") on device %d (sm_%d%d); specializations: %s", c->d->ordinal, c->d->major, c->d->minor, carried);
    return kp_fail(constraint_match ? KP_ERROR_NO_BINARY_FOR_ARCH : KP_ERROR_NO_MATCHING_SPECIALIZATION, "%s",
                   sb->buf);
}
