/*
 * Test double for the AMD SMI C library (libamd_smi.so): the hardware boundary of the
 * `amd_smi` telemetry backend. It exports the same symbols the backend resolves and answers
 * with canned values for two MI300X-like GPUs, so the Rust code runs through the very same
 * dlopen/dlsym path it uses in production. Test-only; never shipped.
 *
 * Struct layouts below are written out per library major from the public amdsmi.h headers
 * (24.6 = ROCm 6.2, 25.x = ROCm 6.4, 26.x = ROCm 7.x), so the C compiler computes field
 * offsets independently of the Rust side.
 *
 * Controls (environment, read at call time):
 *   AMDSMI_MOCK_MAJOR=24|25|26|<n>  major reported by amdsmi_get_lib_version (default 26).
 *                                   24 uses the old year scheme: 24.6.1.0.
 *   AMDSMI_MOCK_INIT_FAIL=1         amdsmi_init returns AMDSMI_STATUS_DRIVER_NOT_LOADED.
 *   AMDSMI_MOCK_CALL_LOG=<path>     append every called function name to <path>.
 *
 * Build: cc -shared -fPIC -o libamd_smi.so.26 amdsmi_mock.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t amdsmi_status_t; /* a C enum in the real header: 4 bytes, values up to 0xFFFFFFFF */

#define ST_SUCCESS 0u
#define ST_INVAL 1u
#define ST_NOT_SUPPORTED 2u
#define ST_OUT_OF_RESOURCES 15u
#define ST_INSUFFICIENT_SIZE 41u
#define ST_NOT_INIT 32u
#define ST_DRIVER_NOT_LOADED 34u

#define N_GPUS 2
#define GIB (1024ull * 1024ull * 1024ull)

/* ---- version ------------------------------------------------------------------------- */

typedef struct { /* 24.x: year scheme */
    uint32_t year, major, minor, release;
    const char *build;
} version_y24_t;

typedef struct { /* 25.x and later */
    uint32_t major, minor, release;
    const char *build;
} version_t;

/* ---- structs shared by 24.6, 25.x and 26.x ------------------------------------------------ */

typedef struct {
    uint32_t gfx_activity, umc_activity, mm_activity;
    uint32_t reserved[13];
} engine_usage_t;

typedef struct {
    uint32_t clk, min_clk, max_clk;
    uint8_t clk_locked, clk_deep_sleep;
    uint32_t reserved[4];
} clk_info_t;

typedef struct {
    uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap; /* uW */
    uint64_t reserved[3];
} power_cap_info_t;

typedef union {
    struct {
        uint64_t function_number : 3;
        uint64_t device_number : 5;
        uint64_t bus_number : 8;
        uint64_t domain_number : 48;
    } f;
    uint64_t as_uint;
} bdf_t;

/* ---- power info ---------------------------------------------------------------------- */

typedef struct { /* 24.6 / 24.7 */
    uint32_t current_socket_power, average_socket_power;
    uint32_t gfx_voltage, soc_voltage, mem_voltage, power_limit;
    uint32_t reserved[11];
} power_info_y24_t;

typedef struct { /* 25.x */
    uint64_t socket_power; /* host only */
    uint32_t current_socket_power, average_socket_power;
    uint32_t gfx_voltage, soc_voltage, mem_voltage, power_limit;
    uint32_t reserved[2];
} power_info_25_t;

typedef struct { /* 26.x */
    uint64_t socket_power;
    uint32_t current_socket_power, average_socket_power;
    uint64_t gfx_voltage, soc_voltage, mem_voltage;
    uint32_t power_limit;
    uint64_t reserved[18];
} power_info_26_t;

/* ---- violation status (25.x prefix == 26.x prefix; 26.x adds per-XCP arrays) ----------- */

#define MAX_XCP 8
#define MAX_XCC 8
typedef struct {
    uint64_t reference_timestamp, violation_timestamp, acc_counter;
    uint64_t acc_prochot_thrm, acc_ppt_pwr, acc_socket_thrm, acc_vr_thrm, acc_hbm_thrm,
        acc_gfx_clk_below_host_limit;
    uint64_t per_prochot_thrm, per_ppt_pwr, per_socket_thrm, per_vr_thrm, per_hbm_thrm,
        per_gfx_clk_below_host_limit;
    uint8_t active_prochot_thrm, active_ppt_pwr, active_socket_thrm, active_vr_thrm,
        active_hbm_thrm, active_gfx_clk_below_host_limit;
    uint64_t acc_arrays[4][MAX_XCP][MAX_XCC];
    uint64_t per_arrays[4][MAX_XCP][MAX_XCC];
    uint8_t active_arrays[4][MAX_XCP][MAX_XCC];
    uint64_t reserved[3][MAX_XCP][MAX_XCC];
} violation_status_26_t;

/* ---- ASIC info ----------------------------------------------------------------------- */

typedef struct { /* 24.6 */
    char market_name[256];
    uint32_t vendor_id;
    char vendor_name[64];
    uint32_t subvendor_id;
    uint64_t device_id;
    uint32_t rev_id;
    char asic_serial[32];
    uint32_t oam_id;
    uint32_t reserved[18];
} asic_info_y24_t;

typedef struct { /* 26.x */
    char market_name[256];
    uint32_t vendor_id;
    char vendor_name[256];
    uint32_t subvendor_id;
    uint64_t device_id;
    uint32_t rev_id;
    char asic_serial[256];
    uint32_t oam_id, num_of_compute_units;
    uint64_t target_graphics_version;
    uint32_t subsystem_id;
    uint32_t reserved[21];
} asic_info_26_t;

typedef struct { /* 26.x */
    uint64_t kfd_id;
    uint32_t node_id, current_partition_id;
    uint32_t reserved[12];
} kfd_info_t;

/* ---- process info -------------------------------------------------------------------- */

typedef struct {
    uint64_t gfx, enc;
    uint32_t reserved[12];
} proc_engine_usage_t;

typedef struct {
    uint64_t gtt_mem, cpu_mem, vram_mem;
    uint32_t reserved[10];
} proc_memory_usage_t;

typedef struct { /* 24.6 */
    char name[32];
    uint32_t pid;
    uint64_t mem;
    proc_engine_usage_t engine_usage;
    proc_memory_usage_t memory_usage;
    char container_name[32];
    uint32_t reserved[4];
} proc_info_y24_t;

typedef struct { /* 26.x */
    char name[256];
    uint32_t pid;
    uint64_t mem;
    proc_engine_usage_t engine_usage;
    proc_memory_usage_t memory_usage;
    char container_name[256];
    uint32_t cu_occupancy, evicted_time;
    uint32_t reserved[10];
} proc_info_26_t;

/* Header-derived sizes; the Rust side asserts the same numbers. */
_Static_assert(sizeof(engine_usage_t) == 64, "engine_usage_t");
_Static_assert(sizeof(clk_info_t) == 32, "clk_info_t");
_Static_assert(sizeof(power_info_y24_t) == 68, "power_info y24");
_Static_assert(sizeof(power_info_25_t) == 40, "power_info 25");
_Static_assert(sizeof(power_info_26_t) == 192, "power_info 26");
_Static_assert(sizeof(proc_info_y24_t) == 224, "proc_info y24");
_Static_assert(sizeof(proc_info_26_t) == 704, "proc_info 26");
_Static_assert(sizeof(asic_info_26_t) == 896, "asic_info 26");

/* ---- state --------------------------------------------------------------------------- */

static int g_initialised;
static char g_sockets[N_GPUS];
static char g_gpus[N_GPUS];
static uint64_t g_energy[N_GPUS];
static uint64_t g_energy_ts[N_GPUS];
static char g_build[] = "mock";

static void log_call(const char *fn) {
    const char *path = getenv("AMDSMI_MOCK_CALL_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", fn);
    fclose(f);
}

static unsigned mock_major(void) {
    const char *s = getenv("AMDSMI_MOCK_MAJOR");
    return (s && *s) ? (unsigned)strtoul(s, NULL, 10) : 26u;
}

static int gpu_index(void *h) {
    for (int i = 0; i < N_GPUS; i++)
        if (h == (void *)&g_gpus[i]) return i;
    return -1;
}

#define ENTER(h)                                   \
    int gpu = -1;                                  \
    log_call(__func__);                            \
    if (!g_initialised) return ST_NOT_INIT;        \
    gpu = gpu_index(h);                            \
    if (gpu < 0) return ST_INVAL;

static void copy_str(char *dst, size_t cap, const char *src) {
    if (!dst || cap == 0) return;
    strncpy(dst, src, cap - 1);
    dst[cap - 1] = '\0';
}

/* ---- library lifetime ---------------------------------------------------------------- */

amdsmi_status_t amdsmi_init(uint64_t flags) {
    log_call(__func__);
    const char *fail = getenv("AMDSMI_MOCK_INIT_FAIL");
    if (fail && strcmp(fail, "1") == 0) return ST_DRIVER_NOT_LOADED;
    if (!(flags & (1u << 1))) return ST_INVAL; /* AMDSMI_INIT_AMD_GPUS expected */
    g_initialised = 1;
    for (int i = 0; i < N_GPUS; i++) {
        g_energy[i] = 0;
        g_energy_ts[i] = 0;
    }
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_shut_down(void) {
    log_call(__func__);
    g_initialised = 0;
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_lib_version(void *out) {
    log_call(__func__);
    if (!out) return ST_INVAL;
    unsigned major = mock_major();
    if (major == 24) {
        version_y24_t v = {24, 6, 1, 0, g_build};
        memcpy(out, &v, sizeof v);
    } else {
        version_t v = {major, 5, 0, g_build};
        memcpy(out, &v, sizeof v);
    }
    return ST_SUCCESS;
}

/* ---- enumeration: two sockets, one GPU each ------------------------------------------ */

amdsmi_status_t amdsmi_get_socket_handles(uint32_t *count, void **handles) {
    log_call(__func__);
    if (!g_initialised) return ST_NOT_INIT;
    if (!count) return ST_INVAL;
    if (!handles) {
        *count = N_GPUS;
        return ST_SUCCESS;
    }
    uint32_t n = *count < N_GPUS ? *count : N_GPUS;
    for (uint32_t i = 0; i < n; i++) handles[i] = &g_sockets[i];
    *count = n;
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_processor_handles(void *socket, uint32_t *count, void **handles) {
    log_call(__func__);
    if (!g_initialised) return ST_NOT_INIT;
    if (!count) return ST_INVAL;
    int s = -1;
    for (int i = 0; i < N_GPUS; i++)
        if (socket == (void *)&g_sockets[i]) s = i;
    if (s < 0) return ST_INVAL;
    if (!handles) {
        *count = 1;
        return ST_SUCCESS;
    }
    if (*count >= 1) {
        handles[0] = &g_gpus[s];
        *count = 1;
    }
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_processor_type(void *h, uint32_t *type) {
    ENTER(h);
    if (!type) return ST_INVAL;
    *type = 1; /* AMDSMI_PROCESSOR_TYPE_AMD_GPU */
    return ST_SUCCESS;
}

/* ---- scalar-out-parameter calls -------------------------------------------------------- */

amdsmi_status_t amdsmi_get_gpu_device_bdf(void *h, bdf_t *bdf) {
    ENTER(h);
    if (!bdf) return ST_INVAL;
    bdf->as_uint = 0;
    bdf->f.domain_number = 0;
    bdf->f.bus_number = gpu == 0 ? 0x0c : 0x22;
    bdf->f.device_number = 0;
    bdf->f.function_number = 0;
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_device_uuid(void *h, unsigned int *len, char *uuid) {
    ENTER(h);
    if (!len || !uuid) return ST_INVAL;
    char text[64];
    snprintf(text, sizeof text, "%s", gpu == 0 ? "3cff74a1-0000-1000-80e9-1e3a5b7c0c00"
                                               : "5aff74a1-0000-1000-80e9-1e3a5b7c2200");
    if (*len < strlen(text) + 1) return ST_INSUFFICIENT_SIZE;
    copy_str(uuid, *len, text);
    *len = (unsigned int)strlen(text);
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_memory_total(void *h, uint32_t mem_type, uint64_t *total) {
    ENTER(h);
    if (!total) return ST_INVAL;
    if (mem_type != 0) return ST_NOT_SUPPORTED; /* AMDSMI_MEM_TYPE_VRAM only */
    *total = 192 * GIB;
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_memory_usage(void *h, uint32_t mem_type, uint64_t *used) {
    ENTER(h);
    if (!used) return ST_INVAL;
    if (mem_type != 0) return ST_NOT_SUPPORTED;
    *used = 150 * GIB;
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_temp_metric(void *h, uint32_t sensor, uint32_t metric, int64_t *temp) {
    ENTER(h);
    if (!temp) return ST_INVAL;
    if (metric != 0) return ST_NOT_SUPPORTED; /* AMDSMI_TEMP_CURRENT only */
    switch (sensor) {
    case 1: *temp = 71; return ST_SUCCESS; /* hotspot / junction, degrees C */
    case 2: *temp = 62; return ST_SUCCESS; /* VRAM */
    default: return ST_NOT_SUPPORTED;      /* MI300X has no edge sensor */
    }
}

/* Each call advances the counter by one second at 612 W: 612e6 uJ / 16 uJ per tick. */
amdsmi_status_t amdsmi_get_energy_count(void *h, uint64_t *energy, float *resolution,
                                        uint64_t *timestamp_ns) {
    ENTER(h);
    if (!energy || !resolution || !timestamp_ns) return ST_INVAL;
    g_energy[gpu] += 38250000ull;
    g_energy_ts[gpu] += 1000000000ull;
    *energy = g_energy[gpu];
    *resolution = 16.0f;
    *timestamp_ns = g_energy_ts[gpu];
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_compute_partition(void *h, char *out, uint32_t len) {
    ENTER(h);
    if (!out || len == 0) return ST_INVAL;
    copy_str(out, len, "SPX");
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_memory_partition(void *h, char *out, uint32_t len) {
    ENTER(h);
    if (!out || len == 0) return ST_INVAL;
    copy_str(out, len, "NPS1");
    return ST_SUCCESS;
}

/* ---- struct-out-parameter calls (layout depends on the reported major) ------------------ */

amdsmi_status_t amdsmi_get_gpu_activity(void *h, engine_usage_t *info) {
    ENTER(h);
    if (!info) return ST_INVAL;
    memset(info, 0, sizeof *info);
    info->gfx_activity = 87;
    info->umc_activity = 41;
    info->mm_activity = UINT16_MAX; /* unsupported */
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_power_info(void *h, void *info) {
    ENTER(h);
    if (!info) return ST_INVAL;
    unsigned major = mock_major();
    if (major == 24) {
        power_info_y24_t p;
        memset(&p, 0, sizeof p);
        p.current_socket_power = 612;
        p.average_socket_power = 598; /* distinct, so a misread offset shows */
        p.power_limit = 750;
        memcpy(info, &p, sizeof p);
    } else if (major == 25) {
        power_info_25_t p;
        memset(&p, 0, sizeof p);
        p.socket_power = UINT64_MAX; /* host only */
        p.current_socket_power = 612;
        p.average_socket_power = 598; /* distinct, so a misread offset shows */
        p.power_limit = 750;
        memcpy(info, &p, sizeof p);
    } else {
        power_info_26_t p;
        memset(&p, 0, sizeof p);
        p.socket_power = 612;
        p.current_socket_power = 612;
        p.average_socket_power = 598; /* distinct, so a misread offset shows */
        p.power_limit = 750;
        memcpy(info, &p, sizeof p);
    }
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_power_cap_info(void *h, uint32_t sensor, power_cap_info_t *info) {
    ENTER(h);
    if (!info || sensor != 0) return ST_INVAL;
    memset(info, 0, sizeof *info);
    info->power_cap = 750000000ull; /* uW */
    info->default_power_cap = 750000000ull;
    info->max_power_cap = 750000000ull;
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_clock_info(void *h, uint32_t clk_type, clk_info_t *info) {
    ENTER(h);
    if (!info) return ST_INVAL;
    memset(info, 0, sizeof *info);
    switch (clk_type) {
    case 0: /* AMDSMI_CLK_TYPE_GFX */
        info->clk = 2100;
        info->min_clk = 500;
        info->max_clk = 2100;
        return ST_SUCCESS;
    case 4: /* AMDSMI_CLK_TYPE_MEM */
        info->clk = 1300;
        info->min_clk = 900;
        info->max_clk = 1300;
        return ST_SUCCESS;
    default:
        return ST_NOT_SUPPORTED;
    }
}

amdsmi_status_t amdsmi_get_violation_status(void *h, violation_status_26_t *v) {
    ENTER(h);
    if (!v) return ST_INVAL;
    if (mock_major() == 24) return ST_NOT_SUPPORTED;
    memset(v, 0, sizeof *v);
    v->acc_counter = 1000;
    v->acc_ppt_pwr = 120;
    v->per_ppt_pwr = 12;
    v->active_ppt_pwr = 1; /* PVIOL: package power tracking limit active */
    v->active_gfx_clk_below_host_limit = UINT8_MAX; /* unsupported */
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_asic_info(void *h, void *info) {
    ENTER(h);
    if (!info) return ST_INVAL;
    if (mock_major() == 24) {
        asic_info_y24_t a;
        memset(&a, 0, sizeof a);
        copy_str(a.market_name, sizeof a.market_name, "AMD Instinct MI300X");
        a.vendor_id = 0x1002;
        a.device_id = 0x74a1;
        memcpy(info, &a, sizeof a);
    } else {
        asic_info_26_t a;
        memset(&a, 0, sizeof a);
        copy_str(a.market_name, sizeof a.market_name, "AMD Instinct MI300X");
        a.vendor_id = 0x1002;
        a.device_id = 0x74a1;
        a.num_of_compute_units = 304;
        a.target_graphics_version = 942;
        memcpy(info, &a, sizeof a);
    }
    return ST_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_kfd_info(void *h, kfd_info_t *info) {
    ENTER(h);
    if (!info) return ST_INVAL;
    memset(info, 0, sizeof *info);
    info->kfd_id = gpu == 0 ? 18421 : 48116;
    info->node_id = (uint32_t)gpu + 2;
    info->current_partition_id = 0;
    return ST_SUCCESS;
}

/* GPU 0 runs one process; GPU 1 none. Buffer too small -> OUT_OF_RESOURCES with the count. */
amdsmi_status_t amdsmi_get_gpu_process_list(void *h, uint32_t *max_processes, void *list) {
    ENTER(h);
    if (!max_processes) return ST_INVAL;
    uint32_t n = gpu == 0 ? 1 : 0;
    if (*max_processes < n || (!list && n > 0)) {
        *max_processes = n;
        return ST_OUT_OF_RESOURCES;
    }
    *max_processes = n;
    if (n == 0) return ST_SUCCESS;
    if (mock_major() == 24) {
        proc_info_y24_t p;
        memset(&p, 0, sizeof p);
        copy_str(p.name, sizeof p.name, "python3");
        p.pid = 4242;
        p.mem = 80 * GIB + 512ull * 1024 * 1024;
        p.memory_usage.gtt_mem = 512ull * 1024 * 1024;
        p.memory_usage.vram_mem = 80 * GIB;
        memcpy(list, &p, sizeof p);
    } else {
        proc_info_26_t p;
        memset(&p, 0, sizeof p);
        copy_str(p.name, sizeof p.name, "python3");
        p.pid = 4242;
        p.mem = 80 * GIB + 512ull * 1024 * 1024;
        p.memory_usage.gtt_mem = 512ull * 1024 * 1024;
        p.memory_usage.vram_mem = 80 * GIB;
        p.cu_occupancy = 304;
        memcpy(list, &p, sizeof p);
    }
    return ST_SUCCESS;
}
