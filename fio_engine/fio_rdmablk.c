/* fio external ioengine "rdmablk": NVMe-oF (NVMe/TCP and RDMA) through rdmablk's host library.
 *
 * This file is the part fio's ABI reaches: the ioengine_ops table and the option table, compiled against
 * the headers of exactly the fio version that loads it (the engine's structures and fio's thread_data,
 * io_u and fio_file layouts change between fio versions; see get_ioengine() for the check). Everything
 * NVMe is session.cpp's, behind engine_api.h.
 *
 * One fio job (thread or process) = one controller connection: init() connects and brings up I/O
 * queues sized from iodepth; post_init() registers fio's I/O buffers with them (RDMA: one memory region
 * for all of fio's iomem, no registration per I/O); queue() turns an io_u into a Read / Write / Dataset
 * Management (trim) / Flush (fsync, fdatasync) command; getevents() runs the queue's completions on the
 * job's own thread and event() hands them to fio. fio asks for file sizes before init() (in its main
 * process, create_serialize): get_file_size() then learns the namespace size over a short connection
 * of its own, from a child process (RDMA resources do not survive fork). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fio.h"
#include "optgroup.h"
#include "verify.h"

#include "engine_api.h"

#if !defined(RDMABLK_FIO_VERSION) || !defined(RDMABLK_FIO_PACKAGE)
#error "RDMABLK_FIO_VERSION (fio's version string, from FIO-VERSION-FILE) and RDMABLK_FIO_PACKAGE (its Debian version) must be defined"
#endif

#define EXPORT __attribute__((visibility("default")))

struct rdmablk_eo {
	void *pad; /* fio stores the thread_data pointer at offset 0 */
	char *transport;
	char *traddr;
	char *trsvcid;
	char *subnqn;
	char *hostnqn;
	char *hostid;
	char *dhchap_secret;
	char *dhchap_ctrl_secret;
	unsigned int nsid;
	unsigned int hdgst;
	unsigned int ddgst;
	unsigned int io_queues;
	unsigned int kato;
	unsigned int busy_poll_us;
};

/* An entry of the option table: every option is the engine's and lands in struct rdmablk_eo; what only
 * some have (a default, limits, an alias) follows as designated initializers. */
#define RDMABLK_OPTION(opt_name, long_name, opt_type, field, help_text, ...)	\
	{								\
		.name = opt_name,					\
		.lname = long_name,					\
		.type = opt_type,					\
		.off1 = offsetof(struct rdmablk_eo, field),		\
		.help = help_text,					\
		.category = FIO_OPT_C_ENGINE,				\
		.group = FIO_OPT_G_INVALID,				\
		__VA_ARGS__						\
	}

static struct fio_option options[] = {
	RDMABLK_OPTION("transport", "NVMe-oF transport", FIO_OPT_STR_STORE, transport,
		       "NVMe-oF transport: tcp or rdma (default tcp)", .alias = "trtype"),
	RDMABLK_OPTION("traddr", "Target address", FIO_OPT_STR_STORE, traddr,
		       "Target address (IPv4 or IPv6)"),
	RDMABLK_OPTION("trsvcid", "Target port", FIO_OPT_STR_STORE, trsvcid,
		       "Target port (transport service id, default 4420)"),
	RDMABLK_OPTION("subnqn", "Subsystem NQN", FIO_OPT_STR_STORE, subnqn,
		       "Subsystem NQN"),
	RDMABLK_OPTION("hostnqn", "Host NQN", FIO_OPT_STR_STORE, hostnqn,
		       "Host NQN (default /etc/nvme/hostnqn, else generated)"),
	RDMABLK_OPTION("hostid", "Host identifier", FIO_OPT_STR_STORE, hostid,
		       "Host identifier, a UUID (default /etc/nvme/hostid, else derived)"),
	RDMABLK_OPTION("dhchap_secret", "DH-HMAC-CHAP host secret", FIO_OPT_STR_STORE, dhchap_secret,
		       "DH-HMAC-CHAP host secret (DHHC-1:XX:...:), used when the controller requires authentication"),
	RDMABLK_OPTION("dhchap_ctrl_secret", "DH-HMAC-CHAP controller secret", FIO_OPT_STR_STORE, dhchap_ctrl_secret,
		       "DH-HMAC-CHAP controller secret: the controller must prove it knows it (bidirectional)"),
	RDMABLK_OPTION("nsid", "Namespace ID", FIO_OPT_INT, nsid,
		       "Namespace ID (0 = from the filename, else 1)", .def = "0"),
	RDMABLK_OPTION("hdgst", "Header digest", FIO_OPT_BOOL, hdgst,
		       "NVMe/TCP header digest (CRC32C)", .def = "0"),
	RDMABLK_OPTION("ddgst", "Data digest", FIO_OPT_BOOL, ddgst,
		       "NVMe/TCP data digest (CRC32C)", .def = "0"),
	RDMABLK_OPTION("io_queues", "I/O queues", FIO_OPT_INT, io_queues,
		       "I/O queues on the job's controller; iodepth is spread over them",
		       .def = "1", .minval = 1, .maxval = 64),
	RDMABLK_OPTION("kato", "Keep-alive timeout", FIO_OPT_INT, kato,
		       "Keep-alive timeout in seconds (0 = none); keep-alives go out while fio calls the engine",
		       .def = "30"),
	RDMABLK_OPTION("busy_poll_us", "Busy poll", FIO_OPT_INT, busy_poll_us,
		       "Poll the queue this many microseconds before sleeping (0 = sleep at once)",
		       .def = "50"),
	{
		.name = NULL,
	},
};

static void rdmablk_log(const char *line)
{
	log_err("%s", line);
}

static void engine_options(struct thread_data *td, struct rdmablk_fio_options *o)
{
	const struct rdmablk_eo *eo = td->eo;

	memset(o, 0, sizeof(*o));
	o->transport = eo->transport;
	o->traddr = eo->traddr;
	o->trsvcid = eo->trsvcid;
	o->subnqn = eo->subnqn;
	o->hostnqn = eo->hostnqn;
	o->hostid = eo->hostid;
	o->dhchap_secret = eo->dhchap_secret;
	o->dhchap_ctrl_secret = eo->dhchap_ctrl_secret;
	o->nsid = eo->nsid;
	o->hdgst = eo->hdgst;
	o->ddgst = eo->ddgst;
	o->io_queues = eo->io_queues;
	o->kato = eo->kato;
	o->busy_poll_us = eo->busy_poll_us;
	o->iodepth = td->o.iodepth;
}

static int fail(struct thread_data *td, int err, const char *what, const char *message)
{
	log_err("fio: rdmablk: %s\n", message);
	td_verror(td, err, what);
	return 1;
}

static const char *ddir_name(int ddir)
{
	return ddir == DDIR_READ ? "read" : ddir == DDIR_WRITE ? "write" : "trim";
}

/* Every block size the job may use must be whole logical blocks of every file's namespace, and reads
 * and writes must fit the controller's largest transfer (MDTS). */
static int check_block_sizes(struct thread_data *td, rdmablk_fio_session *s)
{
	const uint32_t mdts = rdmablk_fio_max_transfer(s);
	struct rdmablk_fio_namespace ns;
	struct fio_file *f;
	char msg[512];
	unsigned int i, k;
	int d;

	if (td_trim(td) && !rdmablk_fio_supports_trim(s)) {
		snprintf(msg, sizeof(msg), "%s does not support Dataset Management (ONCS): no trim",
			 rdmablk_fio_where(s));
		return fail(td, EOPNOTSUPP, "rdmablk trim", msg);
	}
	if (td->o.bs_unaligned) {
		snprintf(msg, sizeof(msg), "bs_unaligned: every I/O must be whole logical blocks of the namespace");
		return fail(td, EINVAL, "rdmablk bs_unaligned", msg);
	}
	for_each_file(td, f, i) {
		if (rdmablk_fio_file(s, i, &ns, msg, sizeof(msg)))
			return fail(td, EINVAL, "rdmablk file", msg);
		for (d = DDIR_READ; d <= DDIR_TRIM; d++) {
			const bool used = d == DDIR_READ ? (td_read(td) || (td_write(td) && td->o.verify != VERIFY_NONE)) :
					  d == DDIR_WRITE ? td_write(td) : td_trim(td);
			unsigned long long sizes[4 + 64];
			unsigned int n = 0;

			if (!used)
				continue;
			sizes[n++] = td->o.bs[d];
			sizes[n++] = td->o.min_bs[d];
			sizes[n++] = td->o.max_bs[d];
			for (k = 0; k < td->o.bssplit_nr[d] && n < sizeof(sizes) / sizeof(sizes[0]); k++)
				sizes[n++] = td->o.bssplit[d][k].bs;
			for (k = 0; k < n; k++) {
				if (sizes[k] == 0 || sizes[k] % ns.lba_size == 0)
					continue;
				snprintf(msg, sizeof(msg),
					 "%s block size %llu is not a multiple of namespace %u's logical block size %u (%s)",
					 ddir_name(d), sizes[k], ns.nsid, ns.lba_size, rdmablk_fio_where(s));
				return fail(td, EINVAL, "rdmablk bs", msg);
			}
			if (td->o.ba[d] % ns.lba_size) {
				snprintf(msg, sizeof(msg),
					 "%s block alignment %llu is not a multiple of namespace %u's logical block size %u",
					 ddir_name(d), td->o.ba[d], ns.nsid, ns.lba_size);
				return fail(td, EINVAL, "rdmablk ba", msg);
			}
			if (d != DDIR_TRIM && mdts && td->o.max_bs[d] > mdts) {
				snprintf(msg, sizeof(msg),
					 "%s block size %llu exceeds the controller's largest transfer of %u bytes (MDTS, %s)",
					 ddir_name(d), td->o.max_bs[d], mdts, rdmablk_fio_where(s));
				return fail(td, EINVAL, "rdmablk bs", msg);
			}
		}
	}
	return 0;
}

static int fio_rdmablk_init(struct thread_data *td)
{
	struct rdmablk_fio_options o;
	rdmablk_fio_session *s;
	const char **names;
	struct fio_file *f;
	unsigned int i;
	char err[1024];

	engine_options(td, &o);
	names = calloc(td->o.nr_files ? td->o.nr_files : 1, sizeof(*names));
	if (!names)
		return fail(td, ENOMEM, "rdmablk init", "out of memory");
	for_each_file(td, f, i)
		names[i] = f->file_name;
	/* io_submit_mode=offload: a submit worker's thread_data gets the job's files from dup_files(), which
	 * fills td->files but leaves files_index at 0. */
	if (td->files_index == 0 && td->files) {
		for (i = 0; i < td->o.nr_files; i++)
			names[i] = td->files[i] ? td->files[i]->file_name : NULL;
	}
	for (i = 0; i < (td->o.nr_files ? td->o.nr_files : 1); i++) {
		if (!names[i]) {
			free(names);
			return fail(td, EINVAL, "rdmablk init", "the job has no filename naming an rdmablk target");
		}
	}
	s = rdmablk_fio_connect(&o, names, td->o.nr_files, err, sizeof(err));
	free(names);
	if (!s)
		return fail(td, ECONNREFUSED, "rdmablk connect", err);
	td->io_ops_data = s;
	if (check_block_sizes(td, s)) {
		rdmablk_fio_close(s);
		td->io_ops_data = NULL;
		return 1;
	}
	return 0;
}

/* fio's I/O buffers exist now (init_io_u ran after init): one registration for all of them. */
static int fio_rdmablk_post_init(struct thread_data *td)
{
	rdmablk_fio_session *s = td->io_ops_data;
	char err[512];

	if (!td->orig_buffer || !td->orig_buffer_size)
		return 0;
	if (rdmablk_fio_register_memory(s, td->orig_buffer, td->orig_buffer_size, err, sizeof(err)))
		return fail(td, ENOMEM, "rdmablk register", err);
	return 0;
}

static void fio_rdmablk_cleanup(struct thread_data *td)
{
	rdmablk_fio_close(td->io_ops_data);
	td->io_ops_data = NULL;
}

static int fio_rdmablk_io_u_init(struct thread_data *td, struct io_u *io_u)
{
	/* io_u->index shares a union with engine_data: read it first. */
	rdmablk_fio_cmd *c = rdmablk_fio_cmd_alloc(td->io_ops_data, io_u, io_u->index);

	if (!c)
		return ENOMEM;
	io_u->engine_data = c;
	return 0;
}

static void fio_rdmablk_io_u_free(struct thread_data *td, struct io_u *io_u)
{
	rdmablk_fio_cmd_free(io_u->engine_data);
	io_u->engine_data = NULL;
}

static enum fio_q_status fio_rdmablk_queue(struct thread_data *td, struct io_u *io_u)
{
	rdmablk_fio_session *s = td->io_ops_data;
	enum rdmablk_fio_op op;
	int rc;

	fio_ro_check(td, io_u);
	switch (io_u->ddir) {
	case DDIR_READ:
		op = RDMABLK_FIO_READ;
		break;
	case DDIR_WRITE:
		op = RDMABLK_FIO_WRITE;
		break;
	case DDIR_TRIM:
		op = RDMABLK_FIO_TRIM;
		break;
	case DDIR_SYNC:
	case DDIR_DATASYNC:
	case DDIR_SYNC_FILE_RANGE:
		op = RDMABLK_FIO_FLUSH;
		break;
	default:
		io_u->error = EINVAL;
		return FIO_Q_COMPLETED;
	}
	rc = rdmablk_fio_submit(s, io_u->engine_data, io_u->file->fileno, op, io_u->offset, io_u->xfer_buflen,
				io_u->xfer_buf);
	if (rc == 0)
		return FIO_Q_QUEUED;
	if (rc == -EBUSY)
		return FIO_Q_BUSY;
	log_err("fio: rdmablk: %s\n", rdmablk_fio_error(s));
	io_u->error = -rc;
	return FIO_Q_COMPLETED;
}

static int fio_rdmablk_commit(struct thread_data *td)
{
	return rdmablk_fio_commit(td->io_ops_data);
}

static int fio_rdmablk_getevents(struct thread_data *td, unsigned int min, unsigned int max,
				 const struct timespec *t)
{
	int64_t timeout_ns = t ? (int64_t)t->tv_sec * 1000000000 + t->tv_nsec : -1;

	return rdmablk_fio_getevents(td->io_ops_data, min, max, timeout_ns);
}

static struct io_u *fio_rdmablk_event(struct thread_data *td, int event)
{
	int error = 0;
	struct io_u *io_u = rdmablk_fio_event(td->io_ops_data, (unsigned int)event, &error);

	if (error)
		io_u->error = error;
	return io_u;
}

static int fio_rdmablk_get_file_size(struct thread_data *td, struct fio_file *f)
{
	struct rdmablk_fio_namespace ns;
	struct rdmablk_fio_options o;
	char err[1024];
	int rc;

	if (fio_file_size_known(f))
		return 0;
	if (td->io_ops_data) {
		rc = rdmablk_fio_file(td->io_ops_data, f->fileno, &ns, err, sizeof(err));
	} else {
		engine_options(td, &o);
		rc = rdmablk_fio_probe(&o, f->file_name, &ns, err, sizeof(err));
	}
	if (rc) {
		log_err("fio: rdmablk: %s\n", err);
		td_verror(td, -rc, "rdmablk get_file_size");
		return 1;
	}
	f->filetype = FIO_TYPE_BLOCK;
	f->real_file_size = ns.size_bytes;
	fio_file_set_size_known(f);
	return 0;
}

/* Nothing to open: the job's connection serves every file (init checked that each names a namespace
 * of its controller). */
static int fio_rdmablk_open_file(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

static int fio_rdmablk_close_file(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

static int fio_rdmablk_invalidate(struct thread_data *td, struct fio_file *f)
{
	return 0; /* no host-side cache */
}

static struct ioengine_ops ioengine = {
	.name = "rdmablk",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_DISKLESSIO | FIO_NODISKUTIL | FIO_NOEXTEND | FIO_RAWIO | FIO_MEMALIGN,
	.init = fio_rdmablk_init,
	.post_init = fio_rdmablk_post_init,
	.queue = fio_rdmablk_queue,
	.commit = fio_rdmablk_commit,
	.getevents = fio_rdmablk_getevents,
	.event = fio_rdmablk_event,
	.cleanup = fio_rdmablk_cleanup,
	.open_file = fio_rdmablk_open_file,
	.close_file = fio_rdmablk_close_file,
	.invalidate = fio_rdmablk_invalidate,
	.get_file_size = fio_rdmablk_get_file_size,
	.io_u_init = fio_rdmablk_io_u_init,
	.io_u_free = fio_rdmablk_io_u_free,
	.option_struct_size = sizeof(struct rdmablk_eo),
	.options = options,
};

/* fio looks up "<engine name>", then "ioengine", then calls get_ioengine(): only the last is exported,
 * so the version check below runs before fio touches anything of ours. The running fio's version is its
 * exported fio_version_string (fio.h; "fio-3.33"), looked up at run time so that a fio without it
 * still gets a message rather than a failed dlopen. */
EXPORT void get_ioengine(struct ioengine_ops **ops)
{
	const char *running = dlsym(RTLD_DEFAULT, "fio_version_string");

	*ops = NULL;
	if (!running) {
		fprintf(stderr, "fio: rdmablk: this fio exports no fio_version_string, so the engine cannot check that "
				"it was built for it (built against %s, Debian fio %s); refusing to load\n",
			RDMABLK_FIO_VERSION, RDMABLK_FIO_PACKAGE);
		return;
	}
	if (strcmp(running, RDMABLK_FIO_VERSION) != 0) {
		fprintf(stderr, "fio: rdmablk: the engine was built against %s (Debian fio %s) but this fio is %s; fio's "
				"ioengine ABI changes between versions, so it refuses to load. Rebuild rdmablk against this "
				"fio (scripts/setup fetches its source) or run the fio it was built for.\n",
			RDMABLK_FIO_VERSION, RDMABLK_FIO_PACKAGE, running);
		return;
	}
	rdmablk_fio_set_log(rdmablk_log);
	*ops = &ioengine;
}
