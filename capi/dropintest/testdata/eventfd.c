// eventfd.c: the drop-in's completion channel and async event fds work
// with poll(2) and O_NONBLOCK as programs expect. A UD QP sends to itself
// on the first device; its CQ is armed on a channel whose fd is
// non-blocking.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(c, what) do { if (!(c)) { printf("FAIL: %s (errno %d)\n", what, errno); return 1; } } while (0)

static int readable(int fd, int ms) {
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

int main(void) {
	struct ibv_device **l = ibv_get_device_list(NULL);
	CHECK(l && l[0], "device list");
	struct ibv_context *ctx = ibv_open_device(l[0]);
	CHECK(ctx, "open");
	CHECK(!readable(ctx->async_fd, 0), "async_fd readable without an event");
	CHECK(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0, "async_fd O_NONBLOCK");
	struct ibv_async_event ae;
	CHECK(ibv_get_async_event(ctx, &ae) == -1 && errno == EAGAIN, "ibv_get_async_event on an empty non-blocking fd: EAGAIN");

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "channel");
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "channel O_NONBLOCK");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, (void *)0x1234, ch, 0);
	CHECK(pd && cq, "pd, cq");
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "mr");
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "qp");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), "INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "RTS");
	union ibv_gid gid;
	CHECK(!ibv_query_gid(ctx, 1, 1, &gid), "gid");
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = 1, .hop_limit = 64}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ah");

	struct ibv_cq *ecq;
	void *ectx;
	CHECK(!readable(ch->fd, 0), "channel readable before any event");
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == -1 && errno == EAGAIN, "ibv_get_cq_event on an empty non-blocking channel: EAGAIN");
	CHECK(!ibv_req_notify_cq(cq, 0), "arm");
	struct ibv_sge rs = {.addr = (uintptr_t)buf, .length = 2048, .lkey = mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *brw;
	CHECK(!ibv_post_recv(qp, &rw, &brw), "post recv");
	strcpy(buf + 2048, "hello");
	struct ibv_sge ss = {.addr = (uintptr_t)buf + 2048, .length = 6, .lkey = mr->lkey};
	struct ibv_send_wr sw = {.wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.wr.ud = {.ah = ah, .remote_qpn = qp->qp_num, .remote_qkey = 0x11111111}}, *bsw;
	CHECK(!ibv_post_send(qp, &sw, &bsw), "post send");
	CHECK(readable(ch->fd, 10000), "channel readable after a completion (poll, 10 s)");
	CHECK(!ibv_get_cq_event(ch, &ecq, &ectx) && ecq == cq && ectx == (void *)0x1234, "ibv_get_cq_event");
	ibv_ack_cq_events(cq, 1);
	struct ibv_wc wc[2];
	int n = 0;
	for (int i = 0; i < 1000000 && n < 2; i++) {
		int k = ibv_poll_cq(cq, 2 - n, wc + n);
		CHECK(k >= 0, "poll cq");
		n += k;
	}
	CHECK(n == 2, "two completions");
	for (int i = 0; i < 2; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS, "completion status");
	CHECK(!memcmp(buf + 40, "hello", 6), "received data after the GRH");
	CHECK(!ibv_destroy_ah(ah) && !ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
	      !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) && !ibv_close_device(ctx), "teardown");
	ibv_free_device_list(l);
	printf("ok\n");
	return 0;
}
