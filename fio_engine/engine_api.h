/* The seam between fio_rdmablk.c (C, compiled against fio's headers: the ioengine_ops table, the option
 * table, struct thread_data / io_u / fio_file) and session.cpp (C++, the rdmablk host library: one
 * controller connection and its I/O queues). Plain C types only; nothing here knows fio's structures,
 * and an I/O is named by an opaque cookie (the io_u) that comes back with its completion.
 *
 * Threading: a session belongs to the fio job thread (or process) that created it; completions are run
 * by that thread inside rdmablk_fio_getevents() (no thread hop). */
#ifndef RDMABLK_FIO_ENGINE_API_H
#define RDMABLK_FIO_ENGINE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The engine's fio options. Strings are NULL when not given. */
struct rdmablk_fio_options {
  const char *transport; /* "tcp" | "rdma" (default tcp) */
  const char *traddr;
  const char *trsvcid;   /* default 4420 */
  const char *subnqn;
  const char *hostnqn;   /* default /etc/nvme/hostnqn, else generated (as nvme-cli) */
  const char *hostid;
  const char *dhchap_secret;      /* DH-HMAC-CHAP host secret (DHHC-1:...), used when the controller asks */
  const char *dhchap_ctrl_secret; /* bidirectional: the controller's secret */
  unsigned nsid;         /* 0 = from the filename, else 1 */
  unsigned hdgst;        /* NVMe/TCP header digest */
  unsigned ddgst;        /* NVMe/TCP data digest */
  unsigned io_queues;    /* I/O queues on the job's controller (io_u i uses queue i % io_queues) */
  unsigned kato;         /* keep-alive timeout, seconds (0 = none) */
  unsigned busy_poll_us; /* poll the queue this long before sleeping */
  unsigned iodepth;      /* fio's iodepth: the commands in flight */
};

enum rdmablk_fio_op {
  RDMABLK_FIO_READ = 0,
  RDMABLK_FIO_WRITE = 1,
  RDMABLK_FIO_TRIM = 2,  /* Dataset Management, deallocate */
  RDMABLK_FIO_FLUSH = 3,
};

/* What a file (a namespace) looks like. */
struct rdmablk_fio_namespace {
  uint32_t nsid;
  uint32_t lba_size;
  uint64_t size_bytes;
};

typedef struct rdmablk_fio_session rdmablk_fio_session;
typedef struct rdmablk_fio_cmd rdmablk_fio_cmd;

/* Where the library's warnings and the engine's data-path errors go (fio's log_err). */
void rdmablk_fio_set_log(void (*log)(const char *line));

/* Connect one controller for the job: every file in `filenames` (fio's filename=, one per file, in
 * fio's file order) must name a namespace of the same controller. NULL on failure, with a message in
 * `err` (NUL-terminated, at most errlen bytes). */
rdmablk_fio_session *rdmablk_fio_connect(const struct rdmablk_fio_options *opts, const char *const *filenames,
                                         unsigned nfiles, char *err, size_t errlen);
/* Shut the controller down (CC.SHN) and free everything. Commands still in flight are dropped. */
void rdmablk_fio_close(rdmablk_fio_session *s);

/* File `index` (fio's fileno) of the session. 0, or -errno with a message. */
int rdmablk_fio_file(rdmablk_fio_session *s, unsigned index, struct rdmablk_fio_namespace *out, char *err,
                     size_t errlen);
/* The namespace `filename` names, learned over a short connection of its own made by a short-lived child
 * process (fio asks for file sizes in its main process before it forks the jobs, and RDMA resources do
 * not survive fork); answers are cached per process. 0, or -errno with a message. */
int rdmablk_fio_probe(const struct rdmablk_fio_options *opts, const char *filename, struct rdmablk_fio_namespace *out,
                      char *err, size_t errlen);

/* Largest read/write data transfer in bytes (MDTS and the transport's limit); 0 = no limit known. */
uint32_t rdmablk_fio_max_transfer(const rdmablk_fio_session *s);
/* Whether the controller supports Dataset Management (ONCS). */
int rdmablk_fio_supports_trim(const rdmablk_fio_session *s);
/* Commands in flight the session's queues can hold in total. */
unsigned rdmablk_fio_queue_depth(const rdmablk_fio_session *s);
/* The controller, for messages: "tcp://127.0.0.1:4420 nqn..." */
const char *rdmablk_fio_where(const rdmablk_fio_session *s);

/* Register [addr, addr+len) with every I/O queue (RDMA: one memory region per queue, so commands whose
 * data lies inside need no registration of their own; TCP: nothing to do). 0, or -errno. */
int rdmablk_fio_register_memory(rdmablk_fio_session *s, void *addr, size_t len, char *err, size_t errlen);

/* One command slot per fio io_u, allocated once (no allocation per I/O). `slot` picks the queue. */
rdmablk_fio_cmd *rdmablk_fio_cmd_alloc(rdmablk_fio_session *s, void *cookie, unsigned slot);
void rdmablk_fio_cmd_free(rdmablk_fio_cmd *c);

/* Queue an I/O on file `file` (bytes; trim and flush ignore `buf`, flush ignores offset and length).
 * 0 = queued (its completion comes out of rdmablk_fio_getevents), -EBUSY = the queue is full (retry
 * after completions), other -errno = refused: rdmablk_fio_error() says why. */
int rdmablk_fio_submit(rdmablk_fio_session *s, rdmablk_fio_cmd *c, unsigned file, enum rdmablk_fio_op op,
                       uint64_t offset, uint64_t length, void *buf);
/* Push what was queued onto the wire without waiting; also sends a due keep-alive. 0 or -errno. */
int rdmablk_fio_commit(rdmablk_fio_session *s);
/* Run completions until at least `min` are ready or `timeout_ns` passes (< 0: no limit); then hand out
 * up to `max` of them, read with rdmablk_fio_event(0 .. n-1). Returns n, or -errno when the connection
 * failed and nothing is left to hand out. */
int rdmablk_fio_getevents(rdmablk_fio_session *s, unsigned min, unsigned max, int64_t timeout_ns);
/* Event `i` of the last getevents: the command's cookie; *error = 0 or a positive errno. */
void *rdmablk_fio_event(rdmablk_fio_session *s, unsigned i, int *error);

/* The last refusal or failure, for a message. */
const char *rdmablk_fio_error(const rdmablk_fio_session *s);

#ifdef __cplusplus
}
#endif

#endif
