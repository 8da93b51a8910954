/* The dry-run driver (_dryrun.c, which includes this part): reading the images it is given. */

/* ------------------------------------------------------------------ cubin reading */

static const unsigned char* section(const unsigned char* img, size_t size, const char* want, uint64_t* len) {
    if (size < 64) return NULL;
    uint64_t shoff, stroff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    memcpy(&shstrndx, img + 0x3e, 2);
    if (shoff + (uint64_t)shnum * shentsize > size) return NULL;
    memcpy(&stroff, img + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    for (int i = 0; i < shnum; i++) {
        const unsigned char* h = img + shoff + (uint64_t)i * shentsize;
        uint32_t name;
        uint64_t off, sz;
        memcpy(&name, h, 4);
        memcpy(&off, h + 0x18, 8);
        memcpy(&sz, h + 0x20, 8);
        if (strcmp((const char*)img + stroff + name, want) == 0 && off + sz <= size) {
            *len = sz;
            return img + off;
        }
    }
    return NULL;
}

static size_t elf_size(const unsigned char* img) {
    uint64_t shoff, phoff;
    uint16_t shentsize, shnum, phentsize, phnum;
    memcpy(&phoff, img + 0x20, 8);
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&phentsize, img + 0x36, 2);
    memcpy(&phnum, img + 0x38, 2);
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    size_t a = shoff + (size_t)shnum * shentsize, b = phoff + (size_t)phnum * phentsize;
    return a > b ? a : b;
}

/* The launch facts of .nv.info.<kernel> (DESIGN.md): KPARAM_INFO (v1, v2), REQNTID, CTA_PER_CLUSTER and
 * EXPLICIT_CLUSTER. 0 when the cubin has no such kernel. */
static int read_kernel(fk_kernel* k, const unsigned char* img, size_t size) {
    char want[300];
    uint64_t len = 0;
    snprintf(want, sizeof want, ".nv.info.%s", k->name);
    const unsigned char* p = section(img, size, want, &len);
    if (p == NULL) return 0;
    const unsigned char* end = p + len;
    while (p + 4 <= end) {
        unsigned fmt = p[0], id = p[1];
        uint16_t v;
        memcpy(&v, p + 2, 2);
        if (fmt == 4) { /* u16 length + payload */
            const unsigned char* d = p + 4;
            if ((id == 0x17 || id == 0x45) && v >= 12) {
                uint16_t ordinal, offset;
                uint32_t flags;
                memcpy(&ordinal, d + 4, 2);
                memcpy(&offset, d + 6, 2);
                memcpy(&flags, d + 8, 4);
                if (ordinal < MAX_PARAMS) {
                    k->offset[ordinal] = offset;
                    k->size[ordinal] = id == 0x17 ? flags >> 18 : flags & 0xffff;
                    if (ordinal + 1 > k->nparams) k->nparams = ordinal + 1;
                }
            } else if (id == 0x10 && v >= 12) {
                memcpy(k->reqntid, d, 12);
            } else if (id == 0x3d && v >= 12) {
                memcpy(k->cluster, d, 12);
            }
            p += 4 + v;
        } else {
            if (fmt == 1 && id == 0x3e) k->explicit_cluster = 1;
            p += 4;
        }
    }
    return 1;
}

static uint64_t fnv1a(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}


/* ------------------------------------------------------------------ which binary, and where it runs */

/* Whether a cubin of ELF ABI version 8 is arch-specific ("a"): record 0x09 (CUDA accelerator target) of .nv.compat
 * is set (kernelpack/core/cubin.py reads it the same way). */
static int compat_accelerator(const unsigned char* img, size_t size) {
    uint64_t len = 0;
    const unsigned char* p = section(img, size, ".nv.compat", &len);
    if (p == NULL) return 0;
    const unsigned char* end = p + len;
    while (p + 4 <= end) {
        unsigned fmt = p[0], id = p[1];
        uint16_t v;
        memcpy(&v, p + 2, 2);
        if (id == 0x09 && (fmt == 2 ? p[2] : fmt == 3 ? v : 0)) return 1;
        p += fmt == 4 ? 4u + v : 4u;
    }
    return 0;
}

/* The arch of the image `l` holds, and its name as kernelpack spells it: a cubin's SM from its ELF flags (ABI 7: the
 * SM in bits 0-7 and 0x800 for "a"; ABI 8: the SM in bits 8-15, "a" in .nv.compat), PTX's from ".target sm_XY[a]".
 * A family ("f") cubin is not marked and reads as plain: it runs where the plain one does. */
static void image_arch(fk_library* l) {
    int sm = 0, exact = 0;
    if (l->is_ptx) {
        const char* t = strstr((const char*)l->image, ".target");
        char suffix = 0;
        if (t != NULL && sscanf(t + 7, " sm_%d%c", &sm, &suffix) >= 1) exact = suffix == 'a';
        snprintf(l->binary, sizeof l->binary, "compute_%d%s PTX", sm, exact ? "a" : "");
    } else {
        uint32_t flags;
        memcpy(&flags, l->image + 0x30, 4);
        if (l->image[8] >= 8) {
            sm = (int)(flags >> 8 & 0xff);
            exact = compat_accelerator(l->image, l->size);
        } else {
            sm = (int)(flags & 0xff);
            exact = (flags & 0x800) && sm >= 90;
        }
        snprintf(l->binary, sizeof l->binary, "sm_%d%s", sm, exact ? "a" : "");
    }
    l->major = sm / 10, l->minor = sm % 10, l->exact = exact;
}

/* Whether the binary of library l runs on device dev (NVIDIA's compatibility rule, kernelpack.launch.binaries): PTX
 * on its arch and any newer one (the driver JIT-compiles it), an arch-specific binary on exactly its arch, SASS on
 * the same major with an equal or newer minor. */
static int runs_on(const fk_library* l, int dev) {
    int major = cfg.cc[dev][0], minor = cfg.cc[dev][1];
    if (l->major == 0) return 1; /* an image whose arch the fake cannot read: the driver decides, not the fake */
    if (l->exact) return major == l->major && minor == l->minor;
    if (l->is_ptx) return major * 10 + minor >= l->major * 10 + l->minor;
    return major == l->major && minor >= l->minor;
}
