// C side of the drop-in: the ops tables programs call through (the inline
// functions of verbs.h), event fds, errno, and the libibverbs functions
// that need no device (strings, rates, sysfs files, fork).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "capi.h"
#include "_cgo_export.h"
#include "layout.h"

void rgo_set_errno(int e) { errno = e; }

// Unimplemented extended verbs answer EOPNOTSUPP through the op table
// slots that verbs.h checks for NULL; the compat slots old binaries could
// reach all fail the same way.
static void *compat_unsupported(void) { errno = EOPNOTSUPP; return NULL; }

void rgo_init_context_ops(struct rgo_context *c) {
	struct verbs_context *v = &c->vctx;
	struct ibv_context_ops *o = &v->context.ops;
	o->_compat_alloc_pd = compat_unsupported;
	o->_compat_dealloc_pd = compat_unsupported;
	o->_compat_reg_mr = compat_unsupported;
	o->_compat_rereg_mr = compat_unsupported;
	o->_compat_dereg_mr = compat_unsupported;
	o->_compat_create_cq = compat_unsupported;
	o->_compat_cq_event = compat_unsupported;
	o->_compat_resize_cq = compat_unsupported;
	o->_compat_destroy_cq = compat_unsupported;
	o->_compat_create_srq = compat_unsupported;
	o->_compat_modify_srq = compat_unsupported;
	o->_compat_query_srq = compat_unsupported;
	o->_compat_destroy_srq = compat_unsupported;
	o->_compat_create_qp = compat_unsupported;
	o->_compat_query_qp = compat_unsupported;
	o->_compat_modify_qp = compat_unsupported;
	o->_compat_destroy_qp = compat_unsupported;
	o->_compat_create_ah = compat_unsupported;
	o->_compat_destroy_ah = compat_unsupported;
	o->_compat_attach_mcast = compat_unsupported;
	o->_compat_detach_mcast = compat_unsupported;
	o->_compat_async_event = compat_unsupported;
	o->_compat_query_device = rgo_ibv_query_device;
	o->_compat_query_port = (void *)rgo_ibv_query_port;
	o->alloc_mw = rgo_alloc_mw;
	o->bind_mw = rgo_bind_mw;
	o->dealloc_mw = rgo_dealloc_mw;
	o->poll_cq = rgo_poll_cq;
	o->req_notify_cq = rgo_req_notify_cq;
	o->post_srq_recv = rgo_post_srq_recv;
	o->post_send = rgo_post_send;
	o->post_recv = rgo_post_recv;

	v->query_port = rgo_query_port;
	v->query_device_ex = (void *)rgo_query_device_ex;
	v->create_qp_ex = rgo_create_qp_ex;
	v->create_cq_ex = rgo_create_cq_ex;
	v->sz = sizeof(*v);
	v->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
}

// The ibv_wr_* calls the soft device does not support (QPs asking for them
// at creation are refused) record the error,
// which wr_complete returns.
static void wr_unsupported_tso(struct ibv_qp_ex *qp, void *hdr, uint16_t hdr_sz, uint16_t mss) { rgo_wr_unsupported(qp); }
static void wr_unsupported_xrc(struct ibv_qp_ex *qp, uint32_t srqn) { rgo_wr_unsupported(qp); }
static void wr_unsupported_atomic_write(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr, const void *wr) { rgo_wr_unsupported(qp); }

void rgo_init_qp_ex_ops(struct rgo_qp *q) {
	struct ibv_qp_ex *x = &q->qpx;
	x->wr_bind_mw = (void *)rgo_wr_bind_mw;
	x->wr_send_tso = wr_unsupported_tso;
	x->wr_set_xrc_srqn = wr_unsupported_xrc;
	x->wr_atomic_write = wr_unsupported_atomic_write;
	x->wr_atomic_cmp_swp = rgo_wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = rgo_wr_atomic_fetch_add;
	x->wr_local_inv = rgo_wr_local_inv;
	x->wr_rdma_read = rgo_wr_rdma_read;
	x->wr_rdma_write = rgo_wr_rdma_write;
	x->wr_rdma_write_imm = rgo_wr_rdma_write_imm;
	x->wr_send = rgo_wr_send;
	x->wr_send_imm = rgo_wr_send_imm;
	x->wr_send_inv = rgo_wr_send_inv;
	x->wr_set_ud_addr = rgo_wr_set_ud_addr;
	x->wr_set_inline_data = rgo_wr_set_inline_data;
	x->wr_set_inline_data_list = (void *)rgo_wr_set_inline_data_list;
	x->wr_set_sge = rgo_wr_set_sge;
	x->wr_set_sge_list = (void *)rgo_wr_set_sge_list;
	x->wr_start = rgo_wr_start;
	x->wr_complete = rgo_wr_complete;
	x->wr_abort = rgo_wr_abort;
}

// An extended CQ (ibv_create_cq_ex): start_poll and next_poll move one
// completion into the wrapper (a call into Go), the read_* calls read it
// there, in C.
#define CUR(cq) (((struct rgo_cq *)(cq))->cur)
static void cq_end_poll(struct ibv_cq_ex *cq) {}
static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *cq) { return CUR(cq).opcode; }
static uint32_t cq_read_vendor_err(struct ibv_cq_ex *cq) { return CUR(cq).vendor_err; }
static uint32_t cq_read_byte_len(struct ibv_cq_ex *cq) { return CUR(cq).byte_len; }
static __be32 cq_read_imm_data(struct ibv_cq_ex *cq) { return CUR(cq).imm_data; }
static uint32_t cq_read_qp_num(struct ibv_cq_ex *cq) { return CUR(cq).qp_num; }
static uint32_t cq_read_src_qp(struct ibv_cq_ex *cq) { return CUR(cq).src_qp; }
static unsigned int cq_read_wc_flags(struct ibv_cq_ex *cq) { return CUR(cq).wc_flags; }
static uint32_t cq_read_slid(struct ibv_cq_ex *cq) { return CUR(cq).slid; }
static uint8_t cq_read_sl(struct ibv_cq_ex *cq) { return CUR(cq).sl; }
static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *cq) { return CUR(cq).dlid_path_bits; }

void rgo_init_cq_ex_ops(struct rgo_cq *q) {
	struct ibv_cq_ex *x = &q->cqx;
	x->start_poll = (void *)rgo_cq_start_poll;
	x->next_poll = rgo_cq_next_poll;
	x->end_poll = cq_end_poll;
	x->read_opcode = cq_read_opcode;
	x->read_vendor_err = cq_read_vendor_err;
	x->read_byte_len = cq_read_byte_len;
	x->read_imm_data = cq_read_imm_data;
	x->read_qp_num = cq_read_qp_num;
	x->read_src_qp = cq_read_src_qp;
	x->read_wc_flags = cq_read_wc_flags;
	x->read_slid = cq_read_slid;
	x->read_sl = cq_read_sl;
	x->read_dlid_path_bits = cq_read_dlid_path_bits;
}

// Completion channels and the async event fd are semaphore eventfds: one
// count per queued event, so that poll(2) and epoll see them readable
// exactly while an event waits, and a read takes one.
int rgo_devnull(void) { return open("/dev/null", O_RDWR | O_CLOEXEC); }

int rgo_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE); }

// rgo_eventfd_wait takes one count, blocking unless the program made the
// fd non-blocking (then -1 with EAGAIN, as libibverbs).
int rgo_eventfd_wait(int fd) {
	uint64_t one;
	for (;;) {
		ssize_t n = read(fd, &one, sizeof one);
		if (n == sizeof one)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return -1;
	}
}

void rgo_eventfd_post(int fd) {
	uint64_t one = 1;
	while (write(fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

int rgo_ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context) {
	struct ibv_cq *c;
	do {
		if (rgo_eventfd_wait(channel->fd))
			return -1;
	} while (!(c = rgo_pop_cq_event(channel)));
	*cq = c;
	*cq_context = c->cq_context;
	return 0;
}

void rgo_ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents) {
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

// rgo_cq_wait_acked waits until the program acknowledged every event
// delivered for cq, as ibv_destroy_cq does.
void rgo_cq_wait_acked(struct ibv_cq *cq, uint32_t comp, uint32_t async) {
	pthread_mutex_lock(&cq->mutex);
	while (cq->comp_events_completed != comp || cq->async_events_completed != async)
		pthread_cond_wait(&cq->cond, &cq->mutex);
	pthread_mutex_unlock(&cq->mutex);
}

int rgo_ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event) {
	do {
		if (rgo_eventfd_wait(context->async_fd))
			return -1;
	} while (rgo_pop_async_event(context, event));
	return 0;
}

void rgo_ibv_ack_async_event(struct ibv_async_event *event) {
	pthread_mutex_t *mu = NULL;
	pthread_cond_t *cond = NULL;
	uint32_t *n = NULL;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		mu = &event->element.cq->mutex;
		cond = &event->element.cq->cond;
		n = &event->element.cq->async_events_completed;
		break;
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		mu = &event->element.qp->mutex;
		cond = &event->element.qp->cond;
		n = &event->element.qp->events_completed;
		break;
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
		mu = &event->element.srq->mutex;
		cond = &event->element.srq->cond;
		n = &event->element.srq->events_completed;
		break;
	default:
		return;
	}
	pthread_mutex_lock(mu);
	++*n;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(mu);
}

// rgo_wait_events waits until n of an object's async events are acked
// (ibv_destroy_qp and ibv_destroy_srq).
void rgo_wait_events(pthread_mutex_t *mu, pthread_cond_t *cond, uint32_t *completed, uint32_t n) {
	pthread_mutex_lock(mu);
	while (*completed != n)
		pthread_cond_wait(cond, mu);
	pthread_mutex_unlock(mu);
}

static const struct rgo_layout_entry layout[] = {
	RGO_LAYOUT(RGO_LAYOUT_OFF, RGO_LAYOUT_SIZE)
	{NULL, 0},
};

// rgo_layout is the table of layout.h as this library was compiled: the
// layout test compares it with the system's verbs.h.
const struct rgo_layout_entry *rgo_layout(void) { return layout; }
