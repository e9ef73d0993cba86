/*
 * The C peers of `tierkv bench ycsb`: RocksDB, LMDB and WiredTiger, from Debian's packages
 * (librocksdb-dev, liblmdb-dev, libwiredtiger-dev), behind one flat interface the Rust
 * adapters in src/ycsb/c_peers.rs call. Built only with the bench crate's `c-peers` feature.
 * LMDB and WiredTiger are linked; RocksDB is loaded at its first open (see below).
 *
 * Every function returns 0 on success (or 1 for "found" where noted) and -1 on an error,
 * with a malloc'ed message in *err that the caller frees with peer_free. Values handed out
 * are malloc'ed copies, freed the same way. A scan hands each entry to the caller's visit
 * function while the engine still holds it; the caller copies it out, as every adapter's
 * scan does (tierkv's included), so that no engine is spared materialising what it read. The settings of each engine (cache, durability,
 * compression, direct I/O) are chosen by the caller and documented there.
 *
 * Must never: hand out a pointer into an engine's memory that outlives its transaction, or
 * report success for a write the engine refused.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>
#include <rocksdb/c.h>
#include <wiredtiger.h>

enum { DURABILITY_SYNC = 0, DURABILITY_BUFFERED = 1, DURABILITY_NONE = 2 };

/* Receives one scanned entry; the bytes are valid only during the call. */
typedef void (*visit_fn)(void *context, const char *key, size_t key_len, const char *value,
                         size_t value_len);

void peer_free(void *pointer) { free(pointer); }

static int fail(char **err, const char *format, ...) {
    char buffer[512];
    va_list args;
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    *err = strdup(buffer);
    return -1;
}

static void *copy(const void *data, size_t len) {
    void *out = malloc(len ? len : 1);
    if (out != NULL && len > 0)
        memcpy(out, data, len);
    return out;
}

/* ---------------------------------------------------------------- RocksDB */

/*
 * Debian's RocksDB is loaded with dlopen, not linked: a build with the `rocksdb-crate` feature
 * also links a current RocksDB (static, from the rocksdb crate) into the binary, with the same
 * C symbols, and a linked librocksdb would have this shim's calls land in whichever of the two
 * the linker took first. Loaded RTLD_LOCAL, Debian's library resolves its own symbols within
 * itself, as the executable does not export the other RocksDB's. It still allocates with the
 * executable's malloc (jemalloc, when its symbols are unprefixed), as a linked one would.
 * "librocksdb.so" is librocksdb-dev's link to the library, the one the headers describe.
 * Each call below goes through dl_<name>, a pointer of the header's own type.
 */
#define ROCKSDB_LIBRARY "librocksdb.so"

#define ROCKSDB_FUNCTIONS(X) \
    X(rocksdb_block_based_options_create) \
    X(rocksdb_block_based_options_destroy) \
    X(rocksdb_block_based_options_set_block_cache) \
    X(rocksdb_block_based_options_set_cache_index_and_filter_blocks) \
    X(rocksdb_block_based_options_set_filter_policy) \
    X(rocksdb_cache_create_lru) \
    X(rocksdb_cache_destroy) \
    X(rocksdb_close) \
    X(rocksdb_create_iterator) \
    X(rocksdb_filterpolicy_create_bloom_full) \
    X(rocksdb_free) \
    X(rocksdb_get) \
    X(rocksdb_iter_destroy) \
    X(rocksdb_iter_get_error) \
    X(rocksdb_iter_key) \
    X(rocksdb_iter_next) \
    X(rocksdb_iter_seek) \
    X(rocksdb_iter_valid) \
    X(rocksdb_iter_value) \
    X(rocksdb_open) \
    X(rocksdb_options_create) \
    X(rocksdb_options_destroy) \
    X(rocksdb_options_set_block_based_table_factory) \
    X(rocksdb_options_set_compression) \
    X(rocksdb_options_set_create_if_missing) \
    X(rocksdb_options_set_max_background_jobs) \
    X(rocksdb_options_set_max_write_buffer_number) \
    X(rocksdb_options_set_use_direct_io_for_flush_and_compaction) \
    X(rocksdb_options_set_use_direct_reads) \
    X(rocksdb_options_set_write_buffer_size) \
    X(rocksdb_put) \
    X(rocksdb_readoptions_create) \
    X(rocksdb_readoptions_destroy) \
    X(rocksdb_writeoptions_create) \
    X(rocksdb_writeoptions_destroy) \
    X(rocksdb_writeoptions_disable_WAL) \
    X(rocksdb_writeoptions_set_sync)

#define DECLARE(name) static __typeof__(name) *dl_##name;
ROCKSDB_FUNCTIONS(DECLARE)
#undef DECLARE

static pthread_once_t rocks_once = PTHREAD_ONCE_INIT;
static char rocks_load_error[512];

static void rocks_load(void) {
    void *library = dlopen(ROCKSDB_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(rocks_load_error, sizeof rocks_load_error, "cannot load %s: %s",
                 ROCKSDB_LIBRARY, dlerror());
        return;
    }
    /* The library stays loaded until the process ends. */
#define LOAD(name)                                                                         \
    if ((dl_##name = (__typeof__(name) *)dlsym(library, #name)) == NULL) {                 \
        snprintf(rocks_load_error, sizeof rocks_load_error, "%s has no %s",                \
                 ROCKSDB_LIBRARY, #name);                                                  \
        return;                                                                            \
    }
    ROCKSDB_FUNCTIONS(LOAD)
#undef LOAD
}

struct rocks {
    rocksdb_t *db;
    rocksdb_options_t *options;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_filterpolicy_t *filter;
    rocksdb_writeoptions_t *write;
    rocksdb_readoptions_t *read;
};

/*
 * The settings come from the caller (src/ycsb/rocksdb_config.rs, which gives the same ones
 * to the RocksDB the rocksdb crate builds): an LRU block cache of block_cache_bytes with the
 * index and filter blocks kept in it so they count against it; write_buffers memtables of
 * write_buffer_bytes; a full bloom filter of bloom_bits per key; no compression; O_DIRECT
 * reads, flushes and compactions when direct is set; each write with sync=true when sync is
 * set, without the WAL when disable_wal is.
 */
struct rocks *peer_rocksdb_open(const char *dir, size_t block_cache_bytes,
                                size_t write_buffer_bytes, int write_buffers, int bloom_bits,
                                int background_jobs, int direct, int sync, int disable_wal,
                                char **err) {
    pthread_once(&rocks_once, rocks_load);
    if (rocks_load_error[0] != '\0') {
        fail(err, "%s", rocks_load_error);
        return NULL;
    }
    struct rocks *r = calloc(1, sizeof *r);
    if (r == NULL) {
        fail(err, "out of memory");
        return NULL;
    }
    r->options = dl_rocksdb_options_create();
    dl_rocksdb_options_set_create_if_missing(r->options, 1);
    dl_rocksdb_options_set_write_buffer_size(r->options, write_buffer_bytes);
    dl_rocksdb_options_set_max_write_buffer_number(r->options, write_buffers);
    dl_rocksdb_options_set_compression(r->options, rocksdb_no_compression);
    dl_rocksdb_options_set_max_background_jobs(r->options, background_jobs);
    dl_rocksdb_options_set_use_direct_reads(r->options, direct ? 1 : 0);
    dl_rocksdb_options_set_use_direct_io_for_flush_and_compaction(r->options, direct ? 1 : 0);
    r->cache = dl_rocksdb_cache_create_lru(block_cache_bytes);
    r->filter = dl_rocksdb_filterpolicy_create_bloom_full(bloom_bits);
    r->table = dl_rocksdb_block_based_options_create();
    dl_rocksdb_block_based_options_set_block_cache(r->table, r->cache);
    dl_rocksdb_block_based_options_set_cache_index_and_filter_blocks(r->table, 1);
    dl_rocksdb_block_based_options_set_filter_policy(r->table, r->filter);
    dl_rocksdb_options_set_block_based_table_factory(r->options, r->table);
    r->write = dl_rocksdb_writeoptions_create();
    dl_rocksdb_writeoptions_set_sync(r->write, sync ? 1 : 0);
    dl_rocksdb_writeoptions_disable_WAL(r->write, disable_wal ? 1 : 0);
    r->read = dl_rocksdb_readoptions_create();
    char *error = NULL;
    r->db = dl_rocksdb_open(r->options, dir, &error);
    if (error != NULL) {
        fail(err, "rocksdb_open: %s", error);
        dl_rocksdb_free(error);
        r->db = NULL;
        return NULL; /* the options leak: a failed open ends the run */
    }
    return r;
}

int peer_rocksdb_put(struct rocks *r, const char *key, size_t key_len, const char *value,
                     size_t value_len, char **err) {
    char *error = NULL;
    dl_rocksdb_put(r->db, r->write, key, key_len, value, value_len, &error);
    if (error != NULL) {
        fail(err, "rocksdb_put: %s", error);
        dl_rocksdb_free(error);
        return -1;
    }
    return 0;
}

/* 1 with *value and *value_len set when found, 0 when not. */
int peer_rocksdb_get(struct rocks *r, const char *key, size_t key_len, char **value,
                     size_t *value_len, char **err) {
    char *error = NULL;
    char *found = dl_rocksdb_get(r->db, r->read, key, key_len, value_len, &error);
    if (error != NULL) {
        fail(err, "rocksdb_get: %s", error);
        dl_rocksdb_free(error);
        return -1;
    }
    if (found == NULL)
        return 0;
    *value = copy(found, *value_len);
    dl_rocksdb_free(found);
    return *value == NULL ? fail(err, "out of memory") : 1;
}

/* Reads up to count entries from key on; *read says how many. */
int peer_rocksdb_scan(struct rocks *r, const char *key, size_t key_len, size_t count,
                      visit_fn visit, void *context, size_t *read, char **err) {
    rocksdb_iterator_t *it = dl_rocksdb_create_iterator(r->db, r->read);
    *read = 0;
    for (dl_rocksdb_iter_seek(it, key, key_len); *read < count && dl_rocksdb_iter_valid(it);
         dl_rocksdb_iter_next(it)) {
        size_t k_len, v_len;
        const char *k = dl_rocksdb_iter_key(it, &k_len);
        const char *v = dl_rocksdb_iter_value(it, &v_len);
        visit(context, k, k_len, v, v_len);
        (*read)++;
    }
    char *error = NULL;
    dl_rocksdb_iter_get_error(it, &error);
    dl_rocksdb_iter_destroy(it);
    if (error != NULL) {
        fail(err, "rocksdb iterator: %s", error);
        dl_rocksdb_free(error);
        return -1;
    }
    return 0;
}

void peer_rocksdb_close(struct rocks *r) {
    dl_rocksdb_close(r->db);
    dl_rocksdb_readoptions_destroy(r->read);
    dl_rocksdb_writeoptions_destroy(r->write);
    dl_rocksdb_options_destroy(r->options);
    dl_rocksdb_block_based_options_destroy(r->table);
    dl_rocksdb_cache_destroy(r->cache);
    free(r);
}

/* ------------------------------------------------------------------- LMDB */

struct lmdb {
    MDB_env *env;
    MDB_dbi dbi;
};

/*
 * One environment and its main database, mapped map_bytes large (a sparse reservation).
 * Reads take their own read-only transaction (MDB_NOTLS: not tied to the thread). LMDB has
 * no cache of its own: it reads through the mapping, so the OS page cache is its cache.
 * Durability: sync = fsync at each commit; buffered = MDB_NOSYNC (written to the OS at
 * commit, not synced); none = MDB_NOSYNC with MDB_WRITEMAP (stores into the mapping).
 */
struct lmdb *peer_lmdb_open(const char *dir, size_t map_bytes, int durability, int max_readers,
                            char **err) {
    struct lmdb *l = calloc(1, sizeof *l);
    if (l == NULL) {
        fail(err, "out of memory");
        return NULL;
    }
    unsigned int flags = MDB_NOTLS | MDB_NORDAHEAD;
    if (durability == DURABILITY_BUFFERED)
        flags |= MDB_NOSYNC;
    if (durability == DURABILITY_NONE)
        flags |= MDB_NOSYNC | MDB_WRITEMAP;
    int rc = mdb_env_create(&l->env);
    if (rc == 0)
        rc = mdb_env_set_mapsize(l->env, map_bytes);
    if (rc == 0)
        rc = mdb_env_set_maxreaders(l->env, (unsigned int)max_readers);
    if (rc == 0)
        rc = mdb_env_open(l->env, dir, flags, 0600);
    MDB_txn *txn = NULL;
    if (rc == 0)
        rc = mdb_txn_begin(l->env, NULL, 0, &txn);
    if (rc == 0)
        rc = mdb_dbi_open(txn, NULL, 0, &l->dbi);
    if (rc == 0) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (rc != 0) {
        fail(err, "lmdb open: %s", mdb_strerror(rc));
        if (txn != NULL)
            mdb_txn_abort(txn);
        if (l->env != NULL)
            mdb_env_close(l->env);
        free(l);
        return NULL;
    }
    return l;
}

int peer_lmdb_put(struct lmdb *l, const char *key, size_t key_len, const char *value,
                  size_t value_len, char **err) {
    MDB_txn *txn;
    int rc = mdb_txn_begin(l->env, NULL, 0, &txn);
    if (rc != 0)
        return fail(err, "mdb_txn_begin: %s", mdb_strerror(rc));
    MDB_val k = {key_len, (void *)key}, v = {value_len, (void *)value};
    rc = mdb_put(txn, l->dbi, &k, &v, 0);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return fail(err, "mdb_put: %s", mdb_strerror(rc));
    }
    rc = mdb_txn_commit(txn);
    return rc == 0 ? 0 : fail(err, "mdb_txn_commit: %s", mdb_strerror(rc));
}

int peer_lmdb_get(struct lmdb *l, const char *key, size_t key_len, char **value,
                  size_t *value_len, char **err) {
    MDB_txn *txn;
    int rc = mdb_txn_begin(l->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return fail(err, "mdb_txn_begin: %s", mdb_strerror(rc));
    MDB_val k = {key_len, (void *)key}, v;
    rc = mdb_get(txn, l->dbi, &k, &v);
    int result = 0;
    if (rc == 0) {
        *value_len = v.mv_size;
        *value = copy(v.mv_data, v.mv_size);
        result = *value == NULL ? fail(err, "out of memory") : 1;
    } else if (rc != MDB_NOTFOUND) {
        result = fail(err, "mdb_get: %s", mdb_strerror(rc));
    }
    mdb_txn_abort(txn);
    return result;
}

int peer_lmdb_scan(struct lmdb *l, const char *key, size_t key_len, size_t count,
                   visit_fn visit, void *context, size_t *read, char **err) {
    MDB_txn *txn;
    MDB_cursor *cursor;
    *read = 0;
    int rc = mdb_txn_begin(l->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return fail(err, "mdb_txn_begin: %s", mdb_strerror(rc));
    rc = mdb_cursor_open(txn, l->dbi, &cursor);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return fail(err, "mdb_cursor_open: %s", mdb_strerror(rc));
    }
    MDB_val k = {key_len, (void *)key}, v;
    rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && *read < count) {
        visit(context, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
        (*read)++;
        rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cursor);
    mdb_txn_abort(txn);
    if (rc != 0 && rc != MDB_NOTFOUND)
        return fail(err, "mdb_cursor_get: %s", mdb_strerror(rc));
    return 0;
}

void peer_lmdb_close(struct lmdb *l) {
    mdb_env_close(l->env);
    free(l);
}

/* ------------------------------------------------------------- WiredTiger */

/*
 * A WT_SESSION is single-threaded: the Rust side keeps a pool of them and hands each
 * operation one. Each session keeps one cursor on the table.
 */
struct wt_session {
    WT_SESSION *session;
    WT_CURSOR *cursor;
};

static const char *WT_TABLE = "table:ycsb";

/*
 * cache_size = cache_bytes; checkpoints every 60 s; no block compression (WiredTiger's
 * default). Durability: sync = log on, fsync at each commit; buffered = log on, written at
 * commit, not synced; none = no log (durable at the next checkpoint). direct sets
 * direct_io=[data] (the log stays buffered).
 */
WT_CONNECTION *peer_wt_open(const char *dir, size_t cache_bytes, int durability, int direct,
                            int sessions, char **err) {
    char config[512];
    const char *log = durability == DURABILITY_NONE
                          ? "log=(enabled=false)"
                          : "log=(enabled=true,archive=true,file_max=100MB)";
    const char *sync = durability == DURABILITY_SYNC
                           ? "transaction_sync=(enabled=true,method=fsync)"
                           : "transaction_sync=(enabled=false)";
    snprintf(config, sizeof config,
             "create,cache_size=%zuB,session_max=%d,checkpoint=(wait=60),%s,%s%s", cache_bytes,
             sessions + 20, log, sync, direct ? ",direct_io=[data]" : "");
    WT_CONNECTION *conn = NULL;
    int rc = wiredtiger_open(dir, NULL, config, &conn);
    if (rc != 0) {
        fail(err, "wiredtiger_open(%s): %s", config, wiredtiger_strerror(rc));
        return NULL;
    }
    WT_SESSION *session;
    rc = conn->open_session(conn, NULL, NULL, &session);
    if (rc == 0)
        rc = session->create(session, WT_TABLE, "key_format=u,value_format=u");
    if (rc != 0) {
        fail(err, "wiredtiger create %s: %s", WT_TABLE, wiredtiger_strerror(rc));
        conn->close(conn, NULL);
        return NULL;
    }
    session->close(session, NULL);
    return conn;
}

struct wt_session *peer_wt_session(WT_CONNECTION *conn, char **err) {
    struct wt_session *s = calloc(1, sizeof *s);
    if (s == NULL) {
        fail(err, "out of memory");
        return NULL;
    }
    int rc = conn->open_session(conn, NULL, NULL, &s->session);
    if (rc == 0)
        rc = s->session->open_cursor(s->session, WT_TABLE, NULL, NULL, &s->cursor);
    if (rc != 0) {
        fail(err, "wiredtiger session: %s", wiredtiger_strerror(rc));
        if (s->session != NULL)
            s->session->close(s->session, NULL);
        free(s);
        return NULL;
    }
    return s;
}

int peer_wt_put(struct wt_session *s, const char *key, size_t key_len, const char *value,
                size_t value_len, char **err) {
    WT_CURSOR *c = s->cursor;
    WT_ITEM k = {.data = key, .size = key_len}, v = {.data = value, .size = value_len};
    c->set_key(c, &k);
    c->set_value(c, &v);
    int rc = c->insert(c); /* overwrite is on by default: an insert replaces */
    c->reset(c);
    return rc == 0 ? 0 : fail(err, "wiredtiger insert: %s", wiredtiger_strerror(rc));
}

int peer_wt_get(struct wt_session *s, const char *key, size_t key_len, char **value,
                size_t *value_len, char **err) {
    WT_CURSOR *c = s->cursor;
    WT_ITEM k = {.data = key, .size = key_len}, v;
    c->set_key(c, &k);
    int rc = c->search(c);
    int result = 0;
    if (rc == 0) {
        rc = c->get_value(c, &v);
        if (rc == 0) {
            *value_len = v.size;
            *value = copy(v.data, v.size);
            result = *value == NULL ? fail(err, "out of memory") : 1;
        }
    }
    if (rc != 0 && rc != WT_NOTFOUND)
        result = fail(err, "wiredtiger search: %s", wiredtiger_strerror(rc));
    c->reset(c);
    return result;
}

int peer_wt_scan(struct wt_session *s, const char *key, size_t key_len, size_t count,
                 visit_fn visit, void *context, size_t *read, char **err) {
    WT_CURSOR *c = s->cursor;
    WT_ITEM k = {.data = key, .size = key_len}, found_key, v;
    int exact;
    *read = 0;
    c->set_key(c, &k);
    int rc = c->search_near(c, &exact);
    if (rc == 0 && exact < 0)
        rc = c->next(c); /* landed before the key: the first at or after it is next */
    while (rc == 0 && *read < count) {
        rc = c->get_key(c, &found_key);
        if (rc == 0)
            rc = c->get_value(c, &v);
        if (rc != 0)
            break;
        visit(context, found_key.data, found_key.size, v.data, v.size);
        (*read)++;
        rc = c->next(c);
    }
    c->reset(c);
    if (rc != 0 && rc != WT_NOTFOUND)
        return fail(err, "wiredtiger scan: %s", wiredtiger_strerror(rc));
    return 0;
}

void peer_wt_session_close(struct wt_session *s) {
    s->session->close(s->session, NULL);
    free(s);
}

int peer_wt_close(WT_CONNECTION *conn, char **err) {
    int rc = conn->close(conn, NULL);
    return rc == 0 ? 0 : fail(err, "wiredtiger close: %s", wiredtiger_strerror(rc));
}
