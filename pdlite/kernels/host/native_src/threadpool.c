/* pdlite native host kernels: the thread pool (see common.h) */
#include "common.h"

#include <sched.h>

/* ------------------------------------------------------------------------------------------------ */
/* thread pool                                                                                      */
/* ------------------------------------------------------------------------------------------------ */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_cv_done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t g_run_mu = PTHREAD_MUTEX_INITIALIZER; /* one parallel job at a time */
PD_HIDDEN int g_threads = 1;   /* threads per job, the caller included */
static int g_workers = 0;   /* worker threads started */
static int g_want = 0;      /* workers invited to the current job */
static unsigned long g_gen = 0;
static int g_open = 0;
static int g_active = 0;
static pd_task g_fn = NULL;
static void *g_ctx = NULL;
static isz g_n = 0, g_grain = 1;
static isz g_next = 0;
/* the open job's per-thread ranges (parallel_ranges), NULL for a parallel_for job */
typedef struct {
    unsigned long long fb; /* the range's front (low 32 bits) and back (high 32 bits) */
    char pad[56];          /* one cache line per range: the threads take from their own without sharing lines */
} __attribute__((aligned(64))) pd_range;
static pd_range *g_ranges = NULL;
static int g_nranges = 0;
/* failure accounting (pd_scratch): the counter of the job a thread runs tasks of, the open job's counter, and a
 * calling thread's own total (read by its Python entry: pd_failures / pd_done) */
static __thread unsigned *tl_job_fail = NULL;
static __thread unsigned tl_failures = 0;
static unsigned *g_job_fail = NULL;

static void run_chunks(pd_task fn, void *ctx, isz n, isz grain) {
    for (;;) {
        isz b = __atomic_fetch_add(&g_next, grain, __ATOMIC_RELAXED);
        if (b >= n) break;
        isz e = b + grain < n ? b + grain : n;
        fn(ctx, b, e);
    }
}

/* up to `grain` items from the front (the range's own thread) or the back (another thread) of range r: sets
 * [*b, *e), returns 0 when the range is empty */
static int range_take(pd_range *r, isz grain, int back, isz *b, isz *e) {
    unsigned long long v = __atomic_load_n(&r->fb, __ATOMIC_RELAXED);
    for (;;) {
        const isz f = (isz)(v & 0xffffffffu), k = (isz)(v >> 32);
        if (f >= k) return 0;
        isz nf = f, nk = k;
        if (back)
            nk = k - grain > f ? k - grain : f;
        else
            nf = f + grain < k ? f + grain : k;
        const unsigned long long nv = ((unsigned long long)nk << 32) | (unsigned long long)nf;
        if (__atomic_compare_exchange_n(&r->fb, &v, nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *b = back ? nk : f;
            *e = back ? k : nf;
            return 1;
        }
    }
}

/* thread `self` of a parallel_ranges job: its own range front to back, then the others' from their backs, the
 * fullest first, until every range is empty */
static void run_ranges(pd_task fn, void *ctx, pd_range *ranges, int nranges, int self, isz grain) {
    isz b, e;
    if (self < nranges)
        while (range_take(&ranges[self], grain, 0, &b, &e)) fn(ctx, b, e);
    for (;;) {
        int victim = -1;
        isz most = 0;
        for (int i = 0; i < nranges; i++) {
            const unsigned long long v = __atomic_load_n(&ranges[i].fb, __ATOMIC_RELAXED);
            const isz left = (isz)(v >> 32) - (isz)(v & 0xffffffffu);
            if (left > most) most = left, victim = i;
        }
        if (victim < 0) return;
        if (range_take(&ranges[victim], grain, 1, &b, &e)) fn(ctx, b, e);
    }
}

/* Spinning: after a job, a worker polls for the next one for g_spin_ns before sleeping on the condition
 * variable, and the caller polls for the workers to finish before sleeping. Waking a sleeping thread takes
 * a futex call and, on a virtual machine whose other vCPU has gone idle, often far longer than the
 * kernels between two consecutive ops (measured: 2 threads ran 1.3x faster than 1 with sleeping
 * workers). PDLITE_NATIVE_SPIN_US sets the time (0: never spin). A spinning thread yields its CPU (sched_yield)
 * every 64 polls: on a loaded machine the spinning worker and the caller can share one CPU, and a spinner that does
 * not yield takes half of it from the caller (or a caller spinning for a worker, from that worker): the transformer's
 * fcs ran 1.6-2x slower at 2 threads than at 1 with the other CPU busy, the same as 1 thread with the yield. */
PD_HIDDEN long g_spin_ns = 200000;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* poll until *p != v (returns 1) or the spin time is over (0) */
static int spin_until_changes(unsigned long *p, unsigned long v) {
    if (g_spin_ns <= 0) return 0;
    long deadline = now_ns() + g_spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) return 1;
            cpu_relax();
        }
        if (now_ns() > deadline) return 0;
        sched_yield();
    }
}

static void spin_until_zero(int *p) {
    if (g_spin_ns <= 0) return;
    long deadline = now_ns() + g_spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == 0) return;
            cpu_relax();
        }
        if (now_ns() > deadline) return;
        sched_yield();
    }
}

static void *worker_main(void *arg) {
    int idx = (int)(intptr_t)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        for (;;) { /* wait for an open job that invites this worker and that it has not run */
            if (g_open && g_gen != seen && idx < g_want) break;
            if (!(g_open && idx < g_want)) seen = g_gen; /* nothing to join up to now */
            pthread_mutex_unlock(&g_mu);
            int changed = spin_until_changes(&g_gen, seen);
            pthread_mutex_lock(&g_mu);
            if (g_open && g_gen != seen && idx < g_want) break;
            if (!changed) pthread_cond_wait(&g_cv_work, &g_mu);
        }
        seen = g_gen;
        g_active++;
        pd_task fn = g_fn;
        void *ctx = g_ctx;
        isz n = g_n, grain = g_grain;
        pd_range *ranges = g_ranges;
        int nranges = g_nranges;
        tl_job_fail = g_job_fail;
        pthread_mutex_unlock(&g_mu);
        if (ranges)
            run_ranges(fn, ctx, ranges, nranges, idx + 1, grain);
        else
            run_chunks(fn, ctx, n, grain);
        tl_job_fail = NULL;
        pthread_mutex_lock(&g_mu);
        if (--g_active == 0) pthread_cond_signal(&g_cv_done);
    }
    return NULL;
}

PD_HIDDEN void pool_after_fork_child(void) {
    /* worker threads do not survive fork(): start over in the child */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER, run = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cw = PTHREAD_COND_INITIALIZER, cd = PTHREAD_COND_INITIALIZER;
    g_mu = mu;
    g_run_mu = run;
    g_cv_work = cw;
    g_cv_done = cd;
    g_workers = 0;
    g_want = 0;
    g_open = 0;
    g_active = 0;
    g_job_fail = NULL;
    g_ranges = NULL;
}

/* The job: fn over [0, n) on up to g_threads threads (the caller is one of them), in chunks of `grain` handed out
 * in order (ranges NULL) or (ranges: room for g_threads of them) from per-thread ranges as parallel_ranges says. */
static void run_job(pd_task fn, void *ctx, isz n, isz grain, pd_range *ranges) {
    if (grain < 1) grain = 1;
    int threads = g_threads;
    if (threads <= 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&g_run_mu);
    isz chunks = (n + grain - 1) / grain;
    int want = threads - 1;
    if ((isz)want > chunks - 1) want = (int)(chunks - 1);
    pthread_mutex_lock(&g_mu);
    while (g_workers < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)g_workers);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        g_workers++;
    }
    if (want > g_workers) want = g_workers;
    unsigned job_fail = 0; /* this job's failures, the caller's and the workers' tasks' */
    g_fn = fn;
    g_ctx = ctx;
    g_n = n;
    g_grain = grain;
    g_job_fail = &job_fail;
    __atomic_store_n(&g_next, 0, __ATOMIC_RELAXED);
    if (ranges) /* the caller's and each invited worker's share, in order */
        for (int i = 0; i <= want; i++) {
            const unsigned long long f = (unsigned long long)(n * i / (want + 1)),
                                     k = (unsigned long long)(n * (i + 1) / (want + 1));
            ranges[i].fb = (k << 32) | f;
        }
    g_ranges = ranges;
    g_nranges = want + 1;
    g_want = want;
    g_open = 1;
    __atomic_store_n(&g_gen, g_gen + 1, __ATOMIC_RELEASE); /* spinning workers see the job from here */
    if (want > 0) pthread_cond_broadcast(&g_cv_work);
    pthread_mutex_unlock(&g_mu);
    tl_job_fail = &job_fail;
    if (ranges)
        run_ranges(fn, ctx, ranges, want + 1, 0, grain);
    else
        run_chunks(fn, ctx, n, grain);
    tl_job_fail = NULL;
    spin_until_zero(&g_active);
    pthread_mutex_lock(&g_mu);
    while (g_active > 0) pthread_cond_wait(&g_cv_done, &g_mu);
    g_open = 0;
    g_job_fail = NULL;
    g_ranges = NULL;
    tl_failures += __atomic_load_n(&job_fail, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_run_mu);
}

PD_HIDDEN void parallel_for(pd_task fn, void *ctx, isz n, isz grain) { run_job(fn, ctx, n, grain, NULL); }

PD_HIDDEN void parallel_ranges(pd_task fn, void *ctx, isz n, isz grain) {
    if (n >= 0x7fffffff) { /* the ranges' bounds are 32-bit */
        run_job(fn, ctx, n, (n + g_threads - 1) / g_threads, NULL);
        return;
    }
    pd_range ranges[PD_MAX_THREADS];
    run_job(fn, ctx, n, grain, ranges);
}

/* chunk size giving about `per_thread` chunks per thread */
PD_HIDDEN isz grain_for(isz n, int per_thread) {
    isz t = (isz)g_threads * per_thread;
    isz g = n / (t > 0 ? t : 1);
    return g > 0 ? g : 1;
}

/* ------------------------------------------------------------------------------------------------ */
/* task scratch memory with failure accounting (see common.h)                                        */
PD_HIDDEN int g_fail_alloc_in = 0; /* > 0: the n-th next pd_scratch fails (tests) */

/* counted for the job this thread runs a task of, else (a task run directly by the caller) for the thread */
static void count_failure(void) {
    if (tl_job_fail)
        __atomic_add_fetch(tl_job_fail, 1, __ATOMIC_RELAXED);
    else
        tl_failures++;
}

PD_HIDDEN void *pd_scratch(size_t bytes) {
    int n = __atomic_load_n(&g_fail_alloc_in, __ATOMIC_RELAXED);
    if (n > 0 && __atomic_sub_fetch(&g_fail_alloc_in, 1, __ATOMIC_RELAXED) == 0) {
        count_failure();
        return NULL;
    }
    void *p = pd_alloc64(bytes);
    if (!p) count_failure();
    return p;
}

PD_HIDDEN void *pd_alloc64(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) return NULL;
    return p;
}

PD_HIDDEN unsigned pd_failures(void) { return tl_failures; }

PD_HIDDEN PyObject *pd_done(unsigned before) {
    if (pd_failures() != before) {
        PyErr_SetString(PyExc_MemoryError, "pdlite native kernel: a task could not allocate its scratch memory");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ */
/* the tests' view of parallel_ranges (module `_ranges_trace`)                                        */
/* ------------------------------------------------------------------------------------------------ */
typedef struct {
    int *runs;        /* per item: how many times it ran */
    int *by_caller;   /* per item: 1 if the calling thread ran it */
    pthread_t caller;
    long slow_ns;     /* the calling thread's time per item (a slow core) */
} trace_args;

static void trace_task(void *vctx, isz begin, isz end) {
    trace_args *t = (trace_args *)vctx;
    const int mine = pthread_equal(pthread_self(), t->caller);
    for (isz i = begin; i < end; i++) {
        __atomic_add_fetch(&t->runs[i], 1, __ATOMIC_RELAXED);
        t->by_caller[i] = mine;
        if (mine && t->slow_ns > 0) {
            const long until = now_ns() + t->slow_ns;
            while (now_ns() < until) cpu_relax();
        }
    }
}

PD_HIDDEN PyObject *py_ranges_trace(PyObject *self, PyObject *args) {
    (void)self;
    isz n, grain;
    long slow_us;
    if (!PyArg_ParseTuple(args, "nnl", &n, &grain, &slow_us)) return NULL;
    if (n < 1 || n > 1000000) {
        PyErr_SetString(PyExc_ValueError, "_ranges_trace: n in [1, 1e6]");
        return NULL;
    }
    trace_args t;
    t.runs = (int *)calloc((size_t)n, sizeof(int));
    t.by_caller = (int *)calloc((size_t)n, sizeof(int));
    if (!t.runs || !t.by_caller) {
        free(t.runs);
        free(t.by_caller);
        return PyErr_NoMemory();
    }
    t.caller = pthread_self();
    t.slow_ns = slow_us * 1000L;
    Py_BEGIN_ALLOW_THREADS;
    parallel_ranges(trace_task, &t, n, grain);
    Py_END_ALLOW_THREADS;
    PyObject *runs = PyList_New(n), *mine = PyList_New(n);
    for (isz i = 0; runs && mine && i < n; i++) {
        PyList_SET_ITEM(runs, i, PyLong_FromLong(t.runs[i]));
        PyList_SET_ITEM(mine, i, PyBool_FromLong(t.by_caller[i]));
    }
    free(t.runs);
    free(t.by_caller);
    if (!runs || !mine) {
        Py_XDECREF(runs);
        Py_XDECREF(mine);
        return NULL;
    }
    return Py_BuildValue("(NN)", runs, mine);
}
