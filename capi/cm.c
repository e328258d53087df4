// C side of the rdma_cm face: the members of rdma_cm_id and rdma_cm_event
// that sit in unions, which cgo cannot name.
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include "capi.h"

static socklen_t sockaddr_len(const void *sa) {
	return ((const struct sockaddr *)sa)->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

// rgo_set_id_addrs sets an id's source and destination addresses (either
// NULL to leave it) and GIDs.
void rgo_set_id_addrs(struct rdma_cm_id *id, const void *src, const void *dst, const void *sgid, const void *dgid) {
	struct rdma_addr *a = &id->route.addr;
	if (src) {
		memset(&a->src_storage, 0, sizeof a->src_storage);
		memcpy(&a->src_storage, src, sockaddr_len(src));
	}
	if (dst) {
		memset(&a->dst_storage, 0, sizeof a->dst_storage);
		memcpy(&a->dst_storage, dst, sockaddr_len(dst));
	}
	memcpy(&a->addr.ibaddr.sgid, sgid, 16);
	memcpy(&a->addr.ibaddr.dgid, dgid, 16);
	a->addr.ibaddr.pkey = htons(0xffff);
}

void rgo_set_event_conn(struct rdma_cm_event *e, const struct rdma_conn_param *p) { e->param.conn = *p; }

void rgo_set_event_ud(struct rdma_cm_event *e, const void *pdata, uint8_t len, const struct ibv_ah_attr *ah, uint32_t qpn, uint32_t qkey) {
	e->param.ud.private_data = pdata;
	e->param.ud.private_data_len = len;
	e->param.ud.ah_attr = *ah;
	e->param.ud.qp_num = qpn;
	e->param.ud.qkey = qkey;
}

// rgo_event_private_data is the copy of the private data an event owns
// (the same pointer in either member of the union).
const void *rgo_event_private_data(const struct rdma_cm_event *e) { return e->param.conn.private_data; }
