/*
 * fake_dcmi.c - npuwatch's own fake of Huawei's DCMI library (libdcmi.so), for demos and tests.
 *
 * Written from the facts in docs/reference/driver-interfaces.md section 6 (prototypes 6.4,
 * LP64 structure layouts 6.5, codes 6.6, units 6.7); no vendor header is used or copied.  Every
 * function of npuwatch.probes.dcmi.abi.PROTOTYPES is exported with the real prototype and
 * answers from a state file (path in the environment variable NPUWATCH_FAKE_DCMI_STATE),
 * parsed again whenever its device, inode, size or modification time change, so a test or the
 * demo's simulator can change it between two calls.  The pure-Python stand-in (standin.py)
 * implements the same rules; a test proves both answer alike.
 *
 * Units are the real library's: power 0.1 W, temperature degC, HBM and DDR sizes MB, process
 * memory bytes, frequency MHz, utilisation %, voltage 0.01 V (MindCluster devmanager/dcmi
 * DcGetDeviceVoltage: "the accuracy is 0.01v", multiplies by ReduceOnePercent).
 *
 * State file: one record a line, fields separated by spaces or tabs; '#' starts a comment line.
 *   card  CARD DEVICE_NUM DEVICE_ID_MAX MCU_ID CPU_ID    a card, in dcmi_get_card_list order
 *   chip  CARD DEV LOGIC_ID PHY_ID                       an NPU chip
 *   i     CARD DEV KEY INTEGER                           an integer value (CARD/DEV -1: global)
 *   s     CARD DEV KEY TEXT...                           a text value (to the end of the line)
 *   proc  CARD DEV PID BYTES                             a process on the chip
 *   err   CARD DEV CODE TEXT...                          an active error code and its text
 *   rc    FUNCTION CARD DEV CODE                         FUNCTION returns CODE (-1: any card/dev)
 *   hang  FUNCTION CARD DEV SECONDS                      FUNCTION sleeps (0: for ever)
 *   crash FUNCTION CARD DEV                              FUNCTION writes through NULL (segfault)
 *   omit  FUNCTION                                       read by the stand-in only (build variant)
 * A value whose key is absent makes its function answer -8255 (NOT_SUPPORT).  Integer keys:
 * health temp power voltage util.<type> freq.<type> aicore_cnt mcu_power (DEV -1)
 * hbm.total hbm.used hbm.freq hbm.temp hbm.bw, mem.total mem.avail mem.freq mem.hpsize
 * mem.hptotal mem.hpfree mem.util, board.board_id board.pcb_id board.bom_id board.slot_id,
 * pci.vendor pci.subvendor pci.device pci.subdevice pci.domain pci.bus pci.dev pci.func,
 * die.<type>.<0..4>, ecc.type ecc.enable ecc.single ecc.double ecc.total_single
 * ecc.total_double ecc.iso_single ecc.iso_double.  Text keys: chip_type chip_name chip_ver
 * npu_name product_type, and dcmi_version driver_version (CARD/DEV -1).
 *
 * Build variants: -DNPUWATCH_FAKE_OMIT_<function> leaves <function> out (a missing symbol).
 * Self-checks: npuwatch_fake_sizeof / npuwatch_fake_offsetof (the compiler's layout of every
 * structure), npuwatch_fake_calls / npuwatch_fake_calls_on (call counters), npuwatch_fake_reset.
 * Calls are expected one at a time (npuwatch's worker serialises them): no locking.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

/* ---------------------------------------------------------------- structures (section 6.5) */

struct dcmi_chip_info {
    unsigned char chip_type[32];
    unsigned char chip_name[32];
    unsigned char chip_ver[32];
    unsigned int aicore_cnt;
};

struct dcmi_chip_info_v2 {
    unsigned char chip_type[32];
    unsigned char chip_name[32];
    unsigned char chip_ver[32];
    unsigned int aicore_cnt;
    unsigned char npu_name[32];
};

struct dcmi_pcie_info_all {
    unsigned int venderid;
    unsigned int subvenderid;
    unsigned int deviceid;
    unsigned int subdeviceid;
    int domain;
    unsigned int bdf_busid;
    unsigned int bdf_deviceid;
    unsigned int bdf_funcid;
    unsigned char reserve[32];
};

struct dcmi_board_info {
    unsigned int board_id;
    unsigned int pcb_id;
    unsigned int bom_id;
    unsigned int slot_id;
};

struct dcmi_die_id {
    unsigned int soc_die[5];
};

struct dcmi_hbm_info {
    unsigned long long memory_size;
    unsigned int freq;
    unsigned long long memory_usage;
    int temp;
    unsigned int bandwith_util_rate; /* sic: the header's spelling */
};

struct dcmi_get_memory_info_stru {
    unsigned long long memory_size;
    unsigned long long memory_available;
    unsigned int freq;
    unsigned long hugepagesize;
    unsigned long hugepages_total;
    unsigned long hugepages_free;
    unsigned int utiliza;
    unsigned char reserve[60];
};

struct dcmi_memory_info {
    unsigned long long memory_size;
    unsigned int freq;
    unsigned int utiliza;
};

struct dcmi_proc_mem_info {
    int proc_id;
    unsigned long proc_mem_usage;
};

struct dcmi_ecc_info {
    int enable_flag;
    unsigned int single_bit_error_cnt;
    unsigned int double_bit_error_cnt;
    unsigned int total_single_bit_error_cnt;
    unsigned int total_double_bit_error_cnt;
    unsigned int single_bit_isolated_pages_cnt;
    unsigned int double_bit_isolated_pages_cnt;
};

struct dcmi_multi_utilization_info {
    unsigned int aic_util;
    unsigned int aiv_util;
    unsigned int aicore_util;
    unsigned int npu_util;
    unsigned int reserved[8];
};

enum dcmi_unit_type { NPU_TYPE = 0, MCU_TYPE = 1, CPU_TYPE = 2, INVALID_TYPE = 0xff };
enum dcmi_die_type { NDIE = 0, VDIE = 1 };
enum dcmi_freq_type {
    DCMI_FREQ_DDR = 1,
    DCMI_FREQ_CTRLCPU = 2,
    DCMI_FREQ_HBM = 6,
    DCMI_FREQ_AICORE_CURRENT_ = 7,
    DCMI_FREQ_AICORE_MAX = 9,
    DCMI_FREQ_VECTORCORE_CURRENT = 12
};
enum dcmi_device_type { DCMI_DEVICE_TYPE_DDR = 0, DCMI_DEVICE_TYPE_HBM = 2, DCMI_DEVICE_TYPE_NONE = 0xff };

#define DCMI_OK 0
#define DCMI_INVALID_PARAMETER (-8001)
#define DCMI_INNER_ERR (-8005)
#define DCMI_INVALID_DEVICE_ID (-8007)
#define DCMI_NOT_SUPPORT (-8255)

/* ---------------------------------------------------------------- functions and counters */

#define FAKE_FUNCTIONS(X)                                                                          \
    X(dcmi_init) X(dcmi_get_dcmi_version) X(dcmi_get_driver_version) X(dcmi_get_card_list)          \
    X(dcmi_get_card_num_list) X(dcmi_get_device_num_in_card) X(dcmi_get_device_id_in_card)         \
    X(dcmi_get_device_type) X(dcmi_get_device_logic_id) X(dcmi_get_device_phyid_from_logicid)      \
    X(dcmi_get_device_chip_info) X(dcmi_get_device_chip_info_v2) X(dcmi_get_device_pcie_info_v2)   \
    X(dcmi_get_device_board_info) X(dcmi_get_device_die_v2) X(dcmi_get_product_type)               \
    X(dcmi_get_device_health) X(dcmi_get_device_errorcode_v2) X(dcmi_get_device_errorcode_string)  \
    X(dcmi_get_device_temperature) X(dcmi_get_device_power_info) X(dcmi_mcu_get_power_info)        \
    X(dcmi_get_device_voltage) X(dcmi_get_device_frequency) X(dcmi_get_device_utilization_rate)    \
    X(dcmi_get_device_hbm_info) X(dcmi_get_device_memory_info_v3) X(dcmi_get_device_memory_info_v2) \
    X(dcmi_get_device_ecc_info) X(dcmi_get_device_resource_info)

#define AS_ENUM(name) F_##name,
enum fake_function { FAKE_FUNCTIONS(AS_ENUM) F_COUNT };
#define AS_NAME(name) #name,
static const char *const FUNCTION_NAMES[F_COUNT] = {FAKE_FUNCTIONS(AS_NAME)};

#define MAX_COUNTERS 4096
struct counter_rec {
    int fid, card, dev;
    long long count;
};
static long long g_totals[F_COUNT];
static struct counter_rec g_counters[MAX_COUNTERS];
static int g_counter_count;
static int g_initialised;

static void count_call(int fid, int card, int dev)
{
    int i;
    g_totals[fid]++;
    for (i = 0; i < g_counter_count; i++) {
        if (g_counters[i].fid == fid && g_counters[i].card == card && g_counters[i].dev == dev) {
            g_counters[i].count++;
            return;
        }
    }
    if (g_counter_count < MAX_COUNTERS) {
        g_counters[g_counter_count].fid = fid;
        g_counters[g_counter_count].card = card;
        g_counters[g_counter_count].dev = dev;
        g_counters[g_counter_count].count = 1;
        g_counter_count++;
    }
}

static int function_id(const char *name)
{
    int i;
    for (i = 0; name != NULL && i < F_COUNT; i++) {
        if (strcmp(FUNCTION_NAMES[i], name) == 0)
            return i;
    }
    return -1;
}

/* ---------------------------------------------------------------- the state file */

#define LINE_BYTES 1024
#define MAX_FILE_BYTES (1024 * 1024)
#define TEXT_BYTES 256
#define KEY_BYTES 32
#define NAME_BYTES 64
#define MAX_CARDS 64
#define MAX_CHIPS 256
#define MAX_INTS 8192
#define MAX_TEXTS 1024
#define MAX_PROCS 2048
#define MAX_ERRORS 1024
#define MAX_FAULTS 256
#define MAX_PROCS_PER_CHIP 32
#define MAX_INT_STARTS 512

enum fault_kind { FAULT_RC = 1, FAULT_HANG = 2, FAULT_CRASH = 3 };

struct card_rec { long long id, num, id_max, mcu, cpu; };
struct chip_rec { long long card, dev, logic, phy; };
struct int_rec { long long card, dev; char key[KEY_BYTES]; long long value; };
struct text_rec { long long card, dev; char key[KEY_BYTES]; char text[TEXT_BYTES]; };
struct proc_rec { long long card, dev, pid, bytes; };
struct error_rec { long long card, dev, code; char text[TEXT_BYTES]; };
struct fault_rec { char function[NAME_BYTES]; long long card, dev, value; int kind; };
/* Where a unit's first int is in ints[]: a lookup starts there (the same first record wins, fewer
 * records passed; a state file lists each chip's ints together). */
struct int_start { long long card, dev; int first; };

struct state {
    int cards_n, chips_n, ints_n, texts_n, procs_n, errors_n, faults_n;
    struct card_rec cards[MAX_CARDS];
    struct chip_rec chips[MAX_CHIPS];
    struct int_rec ints[MAX_INTS];
    struct text_rec texts[MAX_TEXTS];
    struct proc_rec procs[MAX_PROCS];
    struct error_rec errors[MAX_ERRORS];
    struct fault_rec faults[MAX_FAULTS];
    int int_starts_n, int_starts_full;
    struct int_start int_starts[MAX_INT_STARTS];
};

static struct state g_state;
static int g_loaded;
static char g_path[4096];
static dev_t g_dev;
static ino_t g_ino;
static off_t g_size;
static time_t g_mtime_s;
static long g_mtime_ns;

/* The next token (up to a space or tab) after p, copied into out; NULL when there is none. */
static const char *next_token(const char *p, char *out, size_t size)
{
    size_t n = 0;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0')
        return NULL;
    while (*p != '\0' && *p != ' ' && *p != '\t') {
        if (n + 1 < size)
            out[n++] = *p;
        p++;
    }
    out[n] = '\0';
    return p;
}

/* A whole-token integer: decimal, 0x hexadecimal or 0 octal, with an optional sign. */
static int parse_int(const char *text, long long *value)
{
    char *end = NULL;
    const char *digits = text;
    if (*digits == '+' || *digits == '-')
        digits++;
    if (*digits < '0' || *digits > '9')
        return -1;
    errno = 0;
    *value = strtoll(text, &end, 0);
    return (end == NULL || *end != '\0') ? -1 : 0;
}

/* Up to count integer tokens after p; returns the position after them, NULL on failure. */
static const char *ints(const char *p, long long *values, int count)
{
    char token[LINE_BYTES];
    int i;
    for (i = 0; i < count; i++) {
        p = p ? next_token(p, token, sizeof token) : NULL;
        if (p == NULL || parse_int(token, &values[i]) != 0)
            return NULL;
    }
    return p;
}

static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (size == 0)
        return;
    if (n > size - 1)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static const char *rest_of_line(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static const struct int_start *find_int_start(const struct state *s, long long card, long long dev)
{
    int i;
    for (i = s->int_starts_n - 1; i >= 0; i--) {
        if (s->int_starts[i].card == card && s->int_starts[i].dev == dev)
            return &s->int_starts[i];
    }
    return NULL;
}

static void note_int_start(struct state *s, long long card, long long dev, int index)
{
    if (find_int_start(s, card, dev) != NULL)
        return;
    if (s->int_starts_n >= MAX_INT_STARTS) {
        s->int_starts_full = 1; /* lookups of units not listed scan from the first int */
        return;
    }
    s->int_starts[s->int_starts_n].card = card, s->int_starts[s->int_starts_n].dev = dev;
    s->int_starts[s->int_starts_n++].first = index;
}

static void parse_line(struct state *s, const char *line)
{
    char kind[NAME_BYTES], name[LINE_BYTES], key[LINE_BYTES];
    long long v[5];
    const char *p = next_token(line, kind, sizeof kind);
    if (p == NULL || kind[0] == '#')
        return;
    if (strcmp(kind, "card") == 0 && ints(p, v, 5) && s->cards_n < MAX_CARDS) {
        struct card_rec *c = &s->cards[s->cards_n++];
        c->id = v[0], c->num = v[1], c->id_max = v[2], c->mcu = v[3], c->cpu = v[4];
    } else if (strcmp(kind, "chip") == 0 && ints(p, v, 4) && s->chips_n < MAX_CHIPS) {
        struct chip_rec *c = &s->chips[s->chips_n++];
        c->card = v[0], c->dev = v[1], c->logic = v[2], c->phy = v[3];
    } else if (strcmp(kind, "proc") == 0 && ints(p, v, 4) && s->procs_n < MAX_PROCS) {
        struct proc_rec *r = &s->procs[s->procs_n++];
        r->card = v[0], r->dev = v[1], r->pid = v[2], r->bytes = v[3];
    } else if (strcmp(kind, "i") == 0 || strcmp(kind, "s") == 0) {
        p = ints(p, v, 2);
        p = p ? next_token(p, key, sizeof key) : NULL;
        if (p == NULL || strlen(key) >= KEY_BYTES)
            return;
        if (kind[0] == 'i' && s->ints_n < MAX_INTS) {
            char token[LINE_BYTES];
            long long value;
            if (next_token(p, token, sizeof token) == NULL || parse_int(token, &value) != 0)
                return;
            note_int_start(s, v[0], v[1], s->ints_n);
            s->ints[s->ints_n].card = v[0], s->ints[s->ints_n].dev = v[1];
            copy_text(s->ints[s->ints_n].key, KEY_BYTES, key);
            s->ints[s->ints_n++].value = value;
        } else if (kind[0] == 's' && s->texts_n < MAX_TEXTS) {
            s->texts[s->texts_n].card = v[0], s->texts[s->texts_n].dev = v[1];
            copy_text(s->texts[s->texts_n].key, KEY_BYTES, key);
            copy_text(s->texts[s->texts_n++].text, TEXT_BYTES, rest_of_line(p));
        }
    } else if (strcmp(kind, "err") == 0) {
        p = ints(p, v, 3);
        if (p != NULL && s->errors_n < MAX_ERRORS) {
            struct error_rec *e = &s->errors[s->errors_n++];
            e->card = v[0], e->dev = v[1], e->code = v[2];
            copy_text(e->text, TEXT_BYTES, rest_of_line(p));
        }
    } else if (strcmp(kind, "rc") == 0 || strcmp(kind, "hang") == 0 || strcmp(kind, "crash") == 0) {
        int crash = strcmp(kind, "crash") == 0;
        p = next_token(p, name, sizeof name);
        if (p == NULL || strlen(name) >= NAME_BYTES || !ints(p, v, crash ? 2 : 3) || s->faults_n >= MAX_FAULTS)
            return;
        copy_text(s->faults[s->faults_n].function, NAME_BYTES, name);
        s->faults[s->faults_n].card = v[0], s->faults[s->faults_n].dev = v[1];
        s->faults[s->faults_n].value = crash ? 0 : v[2];
        s->faults[s->faults_n++].kind = crash ? FAULT_CRASH : (kind[0] == 'r' ? FAULT_RC : FAULT_HANG);
    }
}

static char g_file[MAX_FILE_BYTES + 1];

/* Split the file into lines: each cut at its first NUL, at most LINE_BYTES - 1 bytes, without
 * its trailing carriage returns and newlines. */
static void parse_file(struct state *s, size_t size)
{
    char line[LINE_BYTES];
    size_t start = 0;
    s->cards_n = s->chips_n = s->ints_n = s->texts_n = s->procs_n = s->errors_n = s->faults_n = 0;
    s->int_starts_n = s->int_starts_full = 0;
    while (start < size) {
        const char *end = memchr(g_file + start, '\n', size - start);
        size_t length = end ? (size_t)(end - (g_file + start)) : size - start, n;
        n = length < LINE_BYTES - 1 ? length : LINE_BYTES - 1;
        memcpy(line, g_file + start, n);
        line[n] = '\0';
        n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        parse_line(s, line);
        start += length + 1;
    }
}

/* Parse the file again when it changed; -1 when it cannot be read (no state: no driver). */
static int refresh_state(void)
{
    const char *path = getenv("NPUWATCH_FAKE_DCMI_STATE");
    struct stat info;
    FILE *file;
    size_t size = 0, got;
    if (path == NULL || *path == '\0' || strlen(path) >= sizeof g_path || stat(path, &info) != 0)
        return -1;
    if (g_loaded && strcmp(path, g_path) == 0 && info.st_dev == g_dev && info.st_ino == g_ino &&
        info.st_size == g_size && info.st_mtim.tv_sec == g_mtime_s && info.st_mtim.tv_nsec == g_mtime_ns)
        return 0;
    file = fopen(path, "rb");
    if (file == NULL)
        return -1;
    while (size < MAX_FILE_BYTES && (got = fread(g_file + size, 1, MAX_FILE_BYTES - size, file)) > 0)
        size += got;
    fclose(file);
    parse_file(&g_state, size);
    copy_text(g_path, sizeof g_path, path);
    g_dev = info.st_dev, g_ino = info.st_ino, g_size = info.st_size;
    g_mtime_s = info.st_mtim.tv_sec, g_mtime_ns = info.st_mtim.tv_nsec;
    g_loaded = 1;
    return 0;
}

static const struct card_rec *find_card(long long card)
{
    int i;
    for (i = 0; i < g_state.cards_n; i++) {
        if (g_state.cards[i].id == card)
            return &g_state.cards[i];
    }
    return NULL;
}

static const struct chip_rec *find_chip(long long card, long long dev)
{
    int i;
    for (i = 0; i < g_state.chips_n; i++) {
        if (g_state.chips[i].card == card && g_state.chips[i].dev == dev)
            return &g_state.chips[i];
    }
    return NULL;
}

/* A chip, or the card's MCU or CPU unit. */
static int device_known(int card, int dev)
{
    const struct card_rec *c = find_card(card);
    if (find_chip(card, dev) != NULL)
        return 1;
    return c != NULL && ((c->mcu >= 0 && c->mcu == dev) || (c->cpu >= 0 && c->cpu == dev));
}

static int get_int(long long card, long long dev, const char *key, long long *value)
{
    const struct int_start *start = find_int_start(&g_state, card, dev);
    int i = start != NULL ? start->first : (g_state.int_starts_full ? 0 : g_state.ints_n);
    for (; i < g_state.ints_n; i++) {
        if (g_state.ints[i].card == card && g_state.ints[i].dev == dev && strcmp(g_state.ints[i].key, key) == 0) {
            *value = g_state.ints[i].value;
            return 1;
        }
    }
    return 0;
}

static long long int_or_zero(int card, int dev, const char *key)
{
    long long value = 0;
    get_int(card, dev, key, &value);
    return value;
}

static const char *get_text(long long card, long long dev, const char *key)
{
    int i;
    for (i = 0; i < g_state.texts_n; i++) {
        if (g_state.texts[i].card == card && g_state.texts[i].dev == dev && strcmp(g_state.texts[i].key, key) == 0)
            return g_state.texts[i].text;
    }
    return NULL;
}

static void hang_for(long long seconds)
{
    struct timespec pause;
    pause.tv_sec = seconds > 0 ? (time_t)seconds : 3600;
    pause.tv_nsec = 0;
    do {
        while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
            ;
        pause.tv_sec = 3600;
    } while (seconds <= 0);
}

/* Through a volatile pointer, so the compiler cannot see the NULL and turn the store into a trap. */
static int *volatile g_nowhere = NULL;

static void crash_now(void)
{
    *g_nowhere = 1;
}

/* Every call starts here: count it, read the state, apply the faults, insist on dcmi_init. */
static int enter(int fid, int card, int dev)
{
    int i;
    count_call(fid, card, dev);
    if (refresh_state() != 0)
        return DCMI_INNER_ERR;
    for (i = 0; i < g_state.faults_n; i++) {
        const struct fault_rec *f = &g_state.faults[i];
        if (strcmp(f->function, FUNCTION_NAMES[fid]) != 0 || (f->card != -1 && f->card != card) ||
            (f->dev != -1 && f->dev != dev))
            continue;
        if (f->kind == FAULT_CRASH)
            crash_now();
        else if (f->kind == FAULT_HANG)
            hang_for(f->value);
        else
            return (int)f->value;
    }
    if (fid != F_dcmi_init && !g_initialised)
        return DCMI_INNER_ERR;
    return DCMI_OK;
}

/* enter(), then the device must exist (a chip, or the card's MCU/CPU unit). */
static int enter_device(int fid, int card, int dev, const void *out)
{
    int rc = enter(fid, card, dev);
    if (rc != DCMI_OK)
        return rc;
    if (out == NULL)
        return DCMI_INVALID_PARAMETER;
    return device_known(card, dev) ? DCMI_OK : DCMI_INVALID_DEVICE_ID;
}

/* An unsigned int value of the device (0 or a code). */
static int device_uint(int fid, int card, int dev, const char *key, unsigned int *out)
{
    long long value;
    int rc = enter_device(fid, card, dev, out);
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card, dev, key, &value))
        return DCMI_NOT_SUPPORT;
    *out = (unsigned int)value;
    return DCMI_OK;
}

static int device_int(int fid, int card, int dev, const char *key, int *out)
{
    long long value;
    int rc = enter_device(fid, card, dev, out);
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card, dev, key, &value))
        return DCMI_NOT_SUPPORT;
    *out = (int)value;
    return DCMI_OK;
}

static int global_text(int fid, const char *key, char *out, long long size)
{
    const char *text;
    int rc = enter(fid, -1, -1);
    if (rc != DCMI_OK)
        return rc;
    if (out == NULL || size <= 0)
        return DCMI_INVALID_PARAMETER;
    text = get_text(-1, -1, key);
    if (text == NULL)
        return DCMI_NOT_SUPPORT;
    copy_text(out, (size_t)size, text);
    return DCMI_OK;
}

static int list_cards(int fid, int *card_num, int *list, int list_len)
{
    int i, n = 0, rc = enter(fid, -1, -1);
    if (rc != DCMI_OK)
        return rc;
    if (card_num == NULL || list == NULL || list_len <= 0)
        return DCMI_INVALID_PARAMETER;
    for (i = 0; i < g_state.cards_n && n < list_len; i++)
        list[n++] = (int)g_state.cards[i].id;
    *card_num = n;
    return DCMI_OK;
}

/* The fields dcmi_chip_info and dcmi_chip_info_v2 share (the caller zeroed the structure). */
static void fill_chip_info(int card, int dev, unsigned char *type, unsigned char *name, unsigned char *ver,
                           unsigned int *aicore_cnt)
{
    const char *chip_type = get_text(card, dev, "chip_type"), *chip_ver = get_text(card, dev, "chip_ver");
    copy_text((char *)type, 32, chip_type ? chip_type : "");
    copy_text((char *)name, 32, get_text(card, dev, "chip_name"));
    copy_text((char *)ver, 32, chip_ver ? chip_ver : "");
    *aicore_cnt = (unsigned int)int_or_zero(card, dev, "aicore_cnt");
}

/* ---------------------------------------------------------------- the exported functions */

#ifndef NPUWATCH_FAKE_OMIT_dcmi_init
int dcmi_init(void)
{
    int rc = enter(F_dcmi_init, -1, -1);
    if (rc == DCMI_OK)
        g_initialised = 1;
    return rc;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_dcmi_version
int dcmi_get_dcmi_version(char *dcmi_ver, unsigned int len)
{
    return global_text(F_dcmi_get_dcmi_version, "dcmi_version", dcmi_ver, len);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_driver_version
int dcmi_get_driver_version(char *driver_ver, unsigned int len)
{
    return global_text(F_dcmi_get_driver_version, "driver_version", driver_ver, len);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_card_list
int dcmi_get_card_list(int *card_num, int *card_list, int list_len)
{
    return list_cards(F_dcmi_get_card_list, card_num, card_list, list_len);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_card_num_list
int dcmi_get_card_num_list(int *card_num, int *card_list, int list_len)
{
    return list_cards(F_dcmi_get_card_num_list, card_num, card_list, list_len);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_num_in_card
int dcmi_get_device_num_in_card(int card_id, int *device_num)
{
    const struct card_rec *c;
    int rc = enter(F_dcmi_get_device_num_in_card, card_id, -1);
    if (rc != DCMI_OK)
        return rc;
    if (device_num == NULL)
        return DCMI_INVALID_PARAMETER;
    if ((c = find_card(card_id)) == NULL)
        return DCMI_INVALID_DEVICE_ID;
    *device_num = (int)c->num;
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_id_in_card
int dcmi_get_device_id_in_card(int card_id, int *device_id_max, int *mcu_id, int *cpu_id)
{
    const struct card_rec *c;
    int rc = enter(F_dcmi_get_device_id_in_card, card_id, -1);
    if (rc != DCMI_OK)
        return rc;
    if (device_id_max == NULL || mcu_id == NULL || cpu_id == NULL)
        return DCMI_INVALID_PARAMETER;
    if ((c = find_card(card_id)) == NULL)
        return DCMI_INVALID_DEVICE_ID;
    *device_id_max = (int)c->id_max, *mcu_id = (int)c->mcu, *cpu_id = (int)c->cpu;
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_type
int dcmi_get_device_type(int card_id, int device_id, enum dcmi_unit_type *device_type)
{
    const struct card_rec *c;
    int rc = enter_device(F_dcmi_get_device_type, card_id, device_id, device_type);
    if (rc != DCMI_OK)
        return rc;
    c = find_card(card_id);
    if (find_chip(card_id, device_id) != NULL)
        *device_type = NPU_TYPE;
    else if (c->mcu >= 0 && c->mcu == device_id)
        *device_type = MCU_TYPE;
    else
        *device_type = CPU_TYPE;
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_logic_id
int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id)
{
    const struct chip_rec *chip;
    int rc = enter_device(F_dcmi_get_device_logic_id, card_id, device_id, device_logic_id);
    if (rc != DCMI_OK)
        return rc;
    if ((chip = find_chip(card_id, device_id)) == NULL)
        return DCMI_INVALID_DEVICE_ID;
    *device_logic_id = (int)chip->logic;
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_phyid_from_logicid
int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int *phyid)
{
    int i, rc = enter(F_dcmi_get_device_phyid_from_logicid, -1, -1);
    if (rc != DCMI_OK)
        return rc;
    if (phyid == NULL)
        return DCMI_INVALID_PARAMETER;
    for (i = 0; i < g_state.chips_n; i++) {
        if (g_state.chips[i].logic == (long long)logicid) {
            *phyid = (unsigned int)g_state.chips[i].phy;
            return DCMI_OK;
        }
    }
    return DCMI_INVALID_DEVICE_ID;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_chip_info
int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info *chip_info)
{
    int rc = enter_device(F_dcmi_get_device_chip_info, card_id, device_id, chip_info);
    if (rc != DCMI_OK)
        return rc;
    if (get_text(card_id, device_id, "chip_name") == NULL)
        return DCMI_NOT_SUPPORT;
    memset(chip_info, 0, sizeof *chip_info);
    fill_chip_info(card_id, device_id, chip_info->chip_type, chip_info->chip_name, chip_info->chip_ver,
                   &chip_info->aicore_cnt);
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_chip_info_v2
int dcmi_get_device_chip_info_v2(int card_id, int device_id, struct dcmi_chip_info_v2 *chip_info)
{
    const char *npu_name;
    int rc = enter_device(F_dcmi_get_device_chip_info_v2, card_id, device_id, chip_info);
    if (rc != DCMI_OK)
        return rc;
    if (get_text(card_id, device_id, "chip_name") == NULL)
        return DCMI_NOT_SUPPORT;
    memset(chip_info, 0, sizeof *chip_info);
    fill_chip_info(card_id, device_id, chip_info->chip_type, chip_info->chip_name, chip_info->chip_ver,
                   &chip_info->aicore_cnt);
    npu_name = get_text(card_id, device_id, "npu_name");
    copy_text((char *)chip_info->npu_name, sizeof chip_info->npu_name, npu_name ? npu_name : "");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_pcie_info_v2
int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all *pcie_info)
{
    int rc = enter_device(F_dcmi_get_device_pcie_info_v2, card_id, device_id, pcie_info);
    long long vendor;
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card_id, device_id, "pci.vendor", &vendor))
        return DCMI_NOT_SUPPORT;
    memset(pcie_info, 0, sizeof *pcie_info);
    pcie_info->venderid = (unsigned int)vendor;
    pcie_info->subvenderid = (unsigned int)int_or_zero(card_id, device_id, "pci.subvendor");
    pcie_info->deviceid = (unsigned int)int_or_zero(card_id, device_id, "pci.device");
    pcie_info->subdeviceid = (unsigned int)int_or_zero(card_id, device_id, "pci.subdevice");
    pcie_info->domain = (int)int_or_zero(card_id, device_id, "pci.domain");
    pcie_info->bdf_busid = (unsigned int)int_or_zero(card_id, device_id, "pci.bus");
    pcie_info->bdf_deviceid = (unsigned int)int_or_zero(card_id, device_id, "pci.dev");
    pcie_info->bdf_funcid = (unsigned int)int_or_zero(card_id, device_id, "pci.func");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_board_info
int dcmi_get_device_board_info(int card_id, int device_id, struct dcmi_board_info *board_info)
{
    int rc = enter_device(F_dcmi_get_device_board_info, card_id, device_id, board_info);
    long long board_id;
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card_id, device_id, "board.board_id", &board_id))
        return DCMI_NOT_SUPPORT;
    memset(board_info, 0, sizeof *board_info);
    board_info->board_id = (unsigned int)board_id;
    board_info->pcb_id = (unsigned int)int_or_zero(card_id, device_id, "board.pcb_id");
    board_info->bom_id = (unsigned int)int_or_zero(card_id, device_id, "board.bom_id");
    board_info->slot_id = (unsigned int)int_or_zero(card_id, device_id, "board.slot_id");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_die_v2
int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type, struct dcmi_die_id *die_id)
{
    char key[KEY_BYTES];
    long long word;
    int i, rc = enter_device(F_dcmi_get_device_die_v2, card_id, device_id, die_id);
    if (rc != DCMI_OK)
        return rc;
    snprintf(key, sizeof key, "die.%d.0", (int)input_type);
    if (!get_int(card_id, device_id, key, &word))
        return DCMI_NOT_SUPPORT;
    memset(die_id, 0, sizeof *die_id);
    for (i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "die.%d.%d", (int)input_type, i);
        die_id->soc_die[i] = (unsigned int)int_or_zero(card_id, device_id, key);
    }
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_product_type
int dcmi_get_product_type(int card_id, int device_id, char *product_type_str, int buf_size)
{
    const char *text;
    int rc = enter_device(F_dcmi_get_product_type, card_id, device_id, product_type_str);
    if (rc != DCMI_OK)
        return rc;
    if (buf_size <= 0)
        return DCMI_INVALID_PARAMETER;
    if ((text = get_text(card_id, device_id, "product_type")) == NULL)
        return DCMI_NOT_SUPPORT;
    copy_text(product_type_str, (size_t)buf_size, text);
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_health
int dcmi_get_device_health(int card_id, int device_id, unsigned int *health)
{
    return device_uint(F_dcmi_get_device_health, card_id, device_id, "health", health);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_errorcode_v2
int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count, unsigned int *error_code_list,
                                 unsigned int list_len)
{
    int i, n = 0, rc = enter_device(F_dcmi_get_device_errorcode_v2, card_id, device_id, error_count);
    if (rc != DCMI_OK)
        return rc;
    if (error_code_list == NULL)
        return DCMI_INVALID_PARAMETER;
    for (i = 0; i < g_state.errors_n && (unsigned int)n < list_len; i++) {
        if (g_state.errors[i].card == card_id && g_state.errors[i].dev == device_id)
            error_code_list[n++] = (unsigned int)g_state.errors[i].code;
    }
    *error_count = n;
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_errorcode_string
int dcmi_get_device_errorcode_string(int card_id, int device_id, unsigned int error_code, unsigned char *error_info,
                                     int buf_size)
{
    int i, rc = enter_device(F_dcmi_get_device_errorcode_string, card_id, device_id, error_info);
    if (rc != DCMI_OK)
        return rc;
    if (buf_size <= 0)
        return DCMI_INVALID_PARAMETER;
    for (i = 0; i < g_state.errors_n; i++) {
        const struct error_rec *e = &g_state.errors[i];
        if (e->card == card_id && e->dev == device_id && (unsigned int)e->code == error_code) {
            copy_text((char *)error_info, (size_t)buf_size, e->text);
            return DCMI_OK;
        }
    }
    return DCMI_INVALID_PARAMETER;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_temperature
int dcmi_get_device_temperature(int card_id, int device_id, int *temperature)
{
    return device_int(F_dcmi_get_device_temperature, card_id, device_id, "temp", temperature);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_power_info
int dcmi_get_device_power_info(int card_id, int device_id, int *power)
{
    return device_int(F_dcmi_get_device_power_info, card_id, device_id, "power", power);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_mcu_get_power_info
int dcmi_mcu_get_power_info(int card_id, int *power)
{
    long long value;
    int rc = enter(F_dcmi_mcu_get_power_info, card_id, -1);
    if (rc != DCMI_OK)
        return rc;
    if (power == NULL)
        return DCMI_INVALID_PARAMETER;
    if (find_card(card_id) == NULL)
        return DCMI_INVALID_DEVICE_ID;
    if (!get_int(card_id, -1, "mcu_power", &value))
        return DCMI_NOT_SUPPORT;
    *power = (int)value;
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_voltage
int dcmi_get_device_voltage(int card_id, int device_id, unsigned int *voltage)
{
    return device_uint(F_dcmi_get_device_voltage, card_id, device_id, "voltage", voltage);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_frequency
int dcmi_get_device_frequency(int card_id, int device_id, enum dcmi_freq_type input_type, unsigned int *frequency)
{
    char key[KEY_BYTES];
    snprintf(key, sizeof key, "freq.%d", (int)input_type);
    return device_uint(F_dcmi_get_device_frequency, card_id, device_id, key, frequency);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_utilization_rate
int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type, unsigned int *utilization_rate)
{
    char key[KEY_BYTES];
    snprintf(key, sizeof key, "util.%d", input_type);
    return device_uint(F_dcmi_get_device_utilization_rate, card_id, device_id, key, utilization_rate);
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_hbm_info
int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info)
{
    long long total;
    int rc = enter_device(F_dcmi_get_device_hbm_info, card_id, device_id, hbm_info);
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card_id, device_id, "hbm.total", &total))
        return DCMI_NOT_SUPPORT;
    memset(hbm_info, 0, sizeof *hbm_info);
    hbm_info->memory_size = (unsigned long long)total;
    hbm_info->freq = (unsigned int)int_or_zero(card_id, device_id, "hbm.freq");
    hbm_info->memory_usage = (unsigned long long)int_or_zero(card_id, device_id, "hbm.used");
    hbm_info->temp = (int)int_or_zero(card_id, device_id, "hbm.temp");
    hbm_info->bandwith_util_rate = (unsigned int)int_or_zero(card_id, device_id, "hbm.bw");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_memory_info_v3
int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *memory_info)
{
    long long total;
    int rc = enter_device(F_dcmi_get_device_memory_info_v3, card_id, device_id, memory_info);
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card_id, device_id, "mem.total", &total))
        return DCMI_NOT_SUPPORT;
    memset(memory_info, 0, sizeof *memory_info);
    memory_info->memory_size = (unsigned long long)total;
    memory_info->memory_available = (unsigned long long)int_or_zero(card_id, device_id, "mem.avail");
    memory_info->freq = (unsigned int)int_or_zero(card_id, device_id, "mem.freq");
    memory_info->hugepagesize = (unsigned long)int_or_zero(card_id, device_id, "mem.hpsize");
    memory_info->hugepages_total = (unsigned long)int_or_zero(card_id, device_id, "mem.hptotal");
    memory_info->hugepages_free = (unsigned long)int_or_zero(card_id, device_id, "mem.hpfree");
    memory_info->utiliza = (unsigned int)int_or_zero(card_id, device_id, "mem.util");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_memory_info_v2
int dcmi_get_device_memory_info_v2(int card_id, int device_id, struct dcmi_memory_info *memory_info)
{
    long long total;
    int rc = enter_device(F_dcmi_get_device_memory_info_v2, card_id, device_id, memory_info);
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card_id, device_id, "mem.total", &total))
        return DCMI_NOT_SUPPORT;
    memset(memory_info, 0, sizeof *memory_info);
    memory_info->memory_size = (unsigned long long)total;
    memory_info->freq = (unsigned int)int_or_zero(card_id, device_id, "mem.freq");
    memory_info->utiliza = (unsigned int)int_or_zero(card_id, device_id, "mem.util");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_ecc_info
int dcmi_get_device_ecc_info(int card_id, int device_id, enum dcmi_device_type input_type,
                             struct dcmi_ecc_info *device_ecc_info)
{
    long long kind;
    int rc = enter_device(F_dcmi_get_device_ecc_info, card_id, device_id, device_ecc_info);
    if (rc != DCMI_OK)
        return rc;
    if (!get_int(card_id, device_id, "ecc.type", &kind) || kind != (long long)input_type)
        return DCMI_NOT_SUPPORT;
    memset(device_ecc_info, 0, sizeof *device_ecc_info);
    device_ecc_info->enable_flag = (int)int_or_zero(card_id, device_id, "ecc.enable");
    device_ecc_info->single_bit_error_cnt = (unsigned int)int_or_zero(card_id, device_id, "ecc.single");
    device_ecc_info->double_bit_error_cnt = (unsigned int)int_or_zero(card_id, device_id, "ecc.double");
    device_ecc_info->total_single_bit_error_cnt = (unsigned int)int_or_zero(card_id, device_id, "ecc.total_single");
    device_ecc_info->total_double_bit_error_cnt = (unsigned int)int_or_zero(card_id, device_id, "ecc.total_double");
    device_ecc_info->single_bit_isolated_pages_cnt = (unsigned int)int_or_zero(card_id, device_id, "ecc.iso_single");
    device_ecc_info->double_bit_isolated_pages_cnt = (unsigned int)int_or_zero(card_id, device_id, "ecc.iso_double");
    return DCMI_OK;
}
#endif

#ifndef NPUWATCH_FAKE_OMIT_dcmi_get_device_resource_info
int dcmi_get_device_resource_info(int card_id, int device_id, struct dcmi_proc_mem_info *proc_info, int *proc_num)
{
    int i, n = 0, rc = enter_device(F_dcmi_get_device_resource_info, card_id, device_id, proc_info);
    if (rc != DCMI_OK)
        return rc;
    if (proc_num == NULL)
        return DCMI_INVALID_PARAMETER;
    for (i = 0; i < g_state.procs_n && n < MAX_PROCS_PER_CHIP; i++) {
        const struct proc_rec *p = &g_state.procs[i];
        if (p->card != card_id || p->dev != device_id)
            continue;
        memset(&proc_info[n], 0, sizeof proc_info[n]);
        proc_info[n].proc_id = (int)p->pid;
        proc_info[n].proc_mem_usage = (unsigned long)p->bytes;
        n++;
    }
    *proc_num = n;
    return DCMI_OK;
}
#endif

/* ---------------------------------------------------------------- self-checks for the tests */

struct size_rec { const char *name; size_t size; };
struct field_rec { const char *name, *field; size_t offset; };

#define SIZE(s) {#s, sizeof(struct s)}
static const struct size_rec SIZES[] = {
    SIZE(dcmi_chip_info), SIZE(dcmi_chip_info_v2), SIZE(dcmi_pcie_info_all), SIZE(dcmi_board_info),
    SIZE(dcmi_die_id), SIZE(dcmi_hbm_info), SIZE(dcmi_get_memory_info_stru), SIZE(dcmi_memory_info),
    SIZE(dcmi_proc_mem_info), SIZE(dcmi_ecc_info), SIZE(dcmi_multi_utilization_info),
};

#define FIELD(s, f) {#s, #f, offsetof(struct s, f)}
static const struct field_rec FIELDS[] = {
    FIELD(dcmi_chip_info, chip_type), FIELD(dcmi_chip_info, chip_name), FIELD(dcmi_chip_info, chip_ver),
    FIELD(dcmi_chip_info, aicore_cnt),
    FIELD(dcmi_chip_info_v2, chip_type), FIELD(dcmi_chip_info_v2, chip_name), FIELD(dcmi_chip_info_v2, chip_ver),
    FIELD(dcmi_chip_info_v2, aicore_cnt), FIELD(dcmi_chip_info_v2, npu_name),
    FIELD(dcmi_pcie_info_all, venderid), FIELD(dcmi_pcie_info_all, subvenderid),
    FIELD(dcmi_pcie_info_all, deviceid), FIELD(dcmi_pcie_info_all, subdeviceid), FIELD(dcmi_pcie_info_all, domain),
    FIELD(dcmi_pcie_info_all, bdf_busid), FIELD(dcmi_pcie_info_all, bdf_deviceid),
    FIELD(dcmi_pcie_info_all, bdf_funcid), FIELD(dcmi_pcie_info_all, reserve),
    FIELD(dcmi_board_info, board_id), FIELD(dcmi_board_info, pcb_id), FIELD(dcmi_board_info, bom_id),
    FIELD(dcmi_board_info, slot_id),
    FIELD(dcmi_die_id, soc_die),
    FIELD(dcmi_hbm_info, memory_size), FIELD(dcmi_hbm_info, freq), FIELD(dcmi_hbm_info, memory_usage),
    FIELD(dcmi_hbm_info, temp), FIELD(dcmi_hbm_info, bandwith_util_rate),
    FIELD(dcmi_get_memory_info_stru, memory_size), FIELD(dcmi_get_memory_info_stru, memory_available),
    FIELD(dcmi_get_memory_info_stru, freq), FIELD(dcmi_get_memory_info_stru, hugepagesize),
    FIELD(dcmi_get_memory_info_stru, hugepages_total), FIELD(dcmi_get_memory_info_stru, hugepages_free),
    FIELD(dcmi_get_memory_info_stru, utiliza), FIELD(dcmi_get_memory_info_stru, reserve),
    FIELD(dcmi_memory_info, memory_size), FIELD(dcmi_memory_info, freq), FIELD(dcmi_memory_info, utiliza),
    FIELD(dcmi_proc_mem_info, proc_id), FIELD(dcmi_proc_mem_info, proc_mem_usage),
    FIELD(dcmi_ecc_info, enable_flag), FIELD(dcmi_ecc_info, single_bit_error_cnt),
    FIELD(dcmi_ecc_info, double_bit_error_cnt), FIELD(dcmi_ecc_info, total_single_bit_error_cnt),
    FIELD(dcmi_ecc_info, total_double_bit_error_cnt), FIELD(dcmi_ecc_info, single_bit_isolated_pages_cnt),
    FIELD(dcmi_ecc_info, double_bit_isolated_pages_cnt),
    FIELD(dcmi_multi_utilization_info, aic_util), FIELD(dcmi_multi_utilization_info, aiv_util),
    FIELD(dcmi_multi_utilization_info, aicore_util), FIELD(dcmi_multi_utilization_info, npu_util),
    FIELD(dcmi_multi_utilization_info, reserved),
};

/* sizeof(struct <name>) as this compiler lays it out; -1 for a structure we do not declare. */
long npuwatch_fake_sizeof(const char *name)
{
    size_t i;
    for (i = 0; name != NULL && i < sizeof SIZES / sizeof SIZES[0]; i++) {
        if (strcmp(SIZES[i].name, name) == 0)
            return (long)SIZES[i].size;
    }
    return -1;
}

/* offsetof(struct <name>, <field>); -1 for an unknown structure or field. */
long npuwatch_fake_offsetof(const char *name, const char *field)
{
    size_t i;
    for (i = 0; name != NULL && field != NULL && i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
        if (strcmp(FIELDS[i].name, name) == 0 && strcmp(FIELDS[i].field, field) == 0)
            return (long)FIELDS[i].offset;
    }
    return -1;
}

/* Calls of <function> since the library loaded (or the last reset); -1 for an unknown name. */
long long npuwatch_fake_calls(const char *function)
{
    int fid = function_id(function);
    return fid < 0 ? -1 : g_totals[fid];
}

/* Calls of <function> for one card and device (-1 -1: the calls that name none). */
long long npuwatch_fake_calls_on(const char *function, int card_id, int device_id)
{
    int i, fid = function_id(function);
    if (fid < 0)
        return -1;
    for (i = 0; i < g_counter_count; i++) {
        if (g_counters[i].fid == fid && g_counters[i].card == card_id && g_counters[i].dev == device_id)
            return g_counters[i].count;
    }
    return 0;
}

/* Forget every count and the initialisation (as a freshly loaded library). */
void npuwatch_fake_reset(void)
{
    memset(g_totals, 0, sizeof g_totals);
    g_counter_count = 0;
    g_initialised = 0;
}
