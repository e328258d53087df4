/* The drop-in's C objects: each verbs object a program sees (struct
 * ibv_context, ibv_pd, ...) is the first member of a wrapper that also
 * holds the cgo handle of its Go state. Layouts are the system's verbs.h. */
#ifndef RGO_CAPI_H
#define RGO_CAPI_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct rgo_device {
	struct ibv_device dev;
	uintptr_t h;
};

struct rgo_context {
	struct verbs_context vctx; /* ends with the struct ibv_context programs see */
	uintptr_t h;
};

struct rgo_pd {
	struct ibv_pd pd;
	uintptr_t h;
};

struct rgo_mr {
	struct ibv_mr mr;
	uintptr_t h;
};

struct rgo_mw {
	struct ibv_mw mw;
	uintptr_t h;
};

struct rgo_cq {
	struct ibv_cq_ex cqx; /* starts with the struct ibv_cq programs see */
	struct ibv_wc cur;    /* an extended CQ's current completion */
	uintptr_t h;
};

struct rgo_comp_channel {
	struct ibv_comp_channel ch;
	uintptr_t h;
};

struct rgo_qp {
	struct ibv_qp_ex qpx; /* starts with the struct ibv_qp */
	int ex;               /* created with send_ops_flags: ibv_qp_to_qp_ex answers */
	uintptr_t h;
};

struct rgo_srq {
	struct ibv_srq srq;
	uintptr_t h;
};

struct rgo_ah {
	struct ibv_ah ah;
	uintptr_t h;
};

/* Offsets the Go side needs: members of unions, which cgo cannot name,
 * and of the wrappers. */
enum {
	offsetof_rgo_context_context = offsetof(struct rgo_context, vctx.context),
	offsetof_port_attr_flags = offsetof(struct ibv_port_attr, flags),
	offsetof_send_wr_imm = offsetof(struct ibv_send_wr, imm_data),
	offsetof_send_wr_rdma_addr = offsetof(struct ibv_send_wr, wr.rdma.remote_addr),
	offsetof_send_wr_rdma_rkey = offsetof(struct ibv_send_wr, wr.rdma.rkey),
	offsetof_send_wr_atomic_addr = offsetof(struct ibv_send_wr, wr.atomic.remote_addr),
	offsetof_send_wr_atomic_compare_add = offsetof(struct ibv_send_wr, wr.atomic.compare_add),
	offsetof_send_wr_atomic_swap = offsetof(struct ibv_send_wr, wr.atomic.swap),
	offsetof_send_wr_atomic_rkey = offsetof(struct ibv_send_wr, wr.atomic.rkey),
	offsetof_send_wr_ud_ah = offsetof(struct ibv_send_wr, wr.ud.ah),
	offsetof_send_wr_ud_qpn = offsetof(struct ibv_send_wr, wr.ud.remote_qpn),
	offsetof_send_wr_ud_qkey = offsetof(struct ibv_send_wr, wr.ud.remote_qkey),
	offsetof_send_wr_bind_mw = offsetof(struct ibv_send_wr, bind_mw.mw),
	offsetof_send_wr_bind_rkey = offsetof(struct ibv_send_wr, bind_mw.rkey),
	offsetof_send_wr_bind_info = offsetof(struct ibv_send_wr, bind_mw.bind_info),
	offsetof_wc_imm = offsetof(struct ibv_wc, imm_data),
	offsetof_rgo_qp_qp = offsetof(struct rgo_qp, qpx.qp_base),
};

/* enum ibv_gid_type_sysfs of rdma-core's private driver.h, which
 * ibv_query_gid_type (IBVERBS_PRIVATE_34, used by ibv_devinfo) reports. */
enum { RGO_GID_TYPE_SYSFS_IB_ROCE_V1 = 0, RGO_GID_TYPE_SYSFS_ROCE_V2 = 1 };

/* ops.c */
void rgo_set_errno(int e);
void rgo_init_context_ops(struct rgo_context *c);
void rgo_init_qp_ex_ops(struct rgo_qp *q);
void rgo_init_cq_ex_ops(struct rgo_cq *q);
int rgo_eventfd(void);
int rgo_devnull(void);
int rgo_eventfd_wait(int fd);
void rgo_eventfd_post(int fd);



#include <rdma/rdma_cma.h>

struct rgo_cm_id {
	struct rdma_cm_id id;
	uintptr_t h;
};

struct rgo_event_channel {
	struct rdma_event_channel ch;
	uintptr_t h;
};

struct rgo_cm_event {
	struct rdma_cm_event ev;
	uintptr_t h;
};

/* cm.c */
void rgo_set_id_addrs(struct rdma_cm_id *id, const void *src, const void *dst, const void *sgid, const void *dgid);
void rgo_set_event_conn(struct rdma_cm_event *e, const struct rdma_conn_param *p);
void rgo_set_event_ud(struct rdma_cm_event *e, const void *pdata, uint8_t len, const struct ibv_ah_attr *ah, uint32_t qpn, uint32_t qkey);
const void *rgo_event_private_data(const struct rdma_cm_event *e);
#endif
