/* Every struct member of verbs.h that the drop-in reads or fills, and the
 * size of every struct it copies: the drop-in compiles this list into a
 * table (rgo_layout, ops.c) and the layout test compiles it again against
 * the system's verbs.h and compares, so a drop-in built against other
 * headers than the programs' is caught. OFF(struct, member), SIZE(struct). */
#define RGO_LAYOUT(OFF, SIZE) \
	SIZE(ibv_device) OFF(ibv_device, node_type) OFF(ibv_device, transport_type) OFF(ibv_device, name) \
	OFF(ibv_device, dev_name) OFF(ibv_device, dev_path) OFF(ibv_device, ibdev_path) \
	SIZE(ibv_context) OFF(ibv_context, device) OFF(ibv_context, ops) OFF(ibv_context, cmd_fd) \
	OFF(ibv_context, async_fd) OFF(ibv_context, num_comp_vectors) OFF(ibv_context, mutex) OFF(ibv_context, abi_compat) \
	SIZE(ibv_context_ops) OFF(ibv_context_ops, _compat_query_device) OFF(ibv_context_ops, _compat_query_port) \
	OFF(ibv_context_ops, alloc_mw) OFF(ibv_context_ops, bind_mw) OFF(ibv_context_ops, dealloc_mw) \
	OFF(ibv_context_ops, poll_cq) OFF(ibv_context_ops, req_notify_cq) OFF(ibv_context_ops, post_srq_recv) \
	OFF(ibv_context_ops, post_send) OFF(ibv_context_ops, post_recv) OFF(ibv_context_ops, _compat_async_event) \
	SIZE(verbs_context) OFF(verbs_context, query_port) OFF(verbs_context, query_device_ex) \
	OFF(verbs_context, create_qp_ex) OFF(verbs_context, sz) OFF(verbs_context, context) \
	SIZE(ibv_pd) OFF(ibv_pd, context) OFF(ibv_pd, handle) \
	SIZE(ibv_mr) OFF(ibv_mr, context) OFF(ibv_mr, pd) OFF(ibv_mr, addr) OFF(ibv_mr, length) OFF(ibv_mr, handle) \
	OFF(ibv_mr, lkey) OFF(ibv_mr, rkey) \
	SIZE(ibv_mw) OFF(ibv_mw, context) OFF(ibv_mw, pd) OFF(ibv_mw, rkey) OFF(ibv_mw, handle) OFF(ibv_mw, type) \
	SIZE(ibv_ah) OFF(ibv_ah, context) OFF(ibv_ah, pd) OFF(ibv_ah, handle) \
	SIZE(ibv_comp_channel) OFF(ibv_comp_channel, context) OFF(ibv_comp_channel, fd) OFF(ibv_comp_channel, refcnt) \
	SIZE(ibv_cq) OFF(ibv_cq, context) OFF(ibv_cq, channel) OFF(ibv_cq, cq_context) OFF(ibv_cq, handle) OFF(ibv_cq, cqe) \
	OFF(ibv_cq, mutex) OFF(ibv_cq, cond) OFF(ibv_cq, comp_events_completed) OFF(ibv_cq, async_events_completed) \
	SIZE(ibv_cq_ex) OFF(ibv_cq_ex, comp_mask) OFF(ibv_cq_ex, status) OFF(ibv_cq_ex, wr_id) OFF(ibv_cq_ex, start_poll) \
	OFF(ibv_cq_ex, next_poll) OFF(ibv_cq_ex, end_poll) OFF(ibv_cq_ex, read_opcode) OFF(ibv_cq_ex, read_dlid_path_bits) \
	SIZE(ibv_cq_init_attr_ex) OFF(ibv_cq_init_attr_ex, cqe) OFF(ibv_cq_init_attr_ex, cq_context) \
	OFF(ibv_cq_init_attr_ex, channel) OFF(ibv_cq_init_attr_ex, comp_vector) OFF(ibv_cq_init_attr_ex, wc_flags) \
	OFF(ibv_cq_init_attr_ex, comp_mask) OFF(ibv_cq_init_attr_ex, flags) OFF(verbs_context, create_cq_ex) \
	SIZE(ibv_srq) OFF(ibv_srq, context) OFF(ibv_srq, srq_context) OFF(ibv_srq, pd) OFF(ibv_srq, handle) \
	OFF(ibv_srq, mutex) OFF(ibv_srq, cond) OFF(ibv_srq, events_completed) \
	SIZE(ibv_qp) OFF(ibv_qp, context) OFF(ibv_qp, qp_context) OFF(ibv_qp, pd) OFF(ibv_qp, send_cq) OFF(ibv_qp, recv_cq) \
	OFF(ibv_qp, srq) OFF(ibv_qp, handle) OFF(ibv_qp, qp_num) OFF(ibv_qp, state) OFF(ibv_qp, qp_type) OFF(ibv_qp, mutex) \
	OFF(ibv_qp, cond) OFF(ibv_qp, events_completed) \
	SIZE(ibv_qp_ex) OFF(ibv_qp_ex, qp_base) OFF(ibv_qp_ex, comp_mask) OFF(ibv_qp_ex, wr_id) OFF(ibv_qp_ex, wr_flags) \
	OFF(ibv_qp_ex, wr_atomic_cmp_swp) OFF(ibv_qp_ex, wr_atomic_fetch_add) OFF(ibv_qp_ex, wr_local_inv) \
	OFF(ibv_qp_ex, wr_rdma_read) OFF(ibv_qp_ex, wr_rdma_write) OFF(ibv_qp_ex, wr_rdma_write_imm) OFF(ibv_qp_ex, wr_send) \
	OFF(ibv_qp_ex, wr_send_imm) OFF(ibv_qp_ex, wr_send_inv) OFF(ibv_qp_ex, wr_set_ud_addr) OFF(ibv_qp_ex, wr_set_inline_data) \
	OFF(ibv_qp_ex, wr_set_inline_data_list) OFF(ibv_qp_ex, wr_set_sge) OFF(ibv_qp_ex, wr_set_sge_list) \
	OFF(ibv_qp_ex, wr_start) OFF(ibv_qp_ex, wr_complete) OFF(ibv_qp_ex, wr_abort) \
	SIZE(ibv_sge) OFF(ibv_sge, addr) OFF(ibv_sge, length) OFF(ibv_sge, lkey) \
	SIZE(ibv_send_wr) OFF(ibv_send_wr, wr_id) OFF(ibv_send_wr, next) OFF(ibv_send_wr, sg_list) OFF(ibv_send_wr, num_sge) \
	OFF(ibv_send_wr, opcode) OFF(ibv_send_wr, send_flags) OFF(ibv_send_wr, imm_data) OFF(ibv_send_wr, wr.rdma.remote_addr) \
	OFF(ibv_send_wr, wr.rdma.rkey) OFF(ibv_send_wr, wr.atomic.remote_addr) OFF(ibv_send_wr, wr.atomic.compare_add) \
	OFF(ibv_send_wr, wr.atomic.swap) OFF(ibv_send_wr, wr.atomic.rkey) OFF(ibv_send_wr, wr.ud.ah) \
	OFF(ibv_send_wr, wr.ud.remote_qpn) OFF(ibv_send_wr, wr.ud.remote_qkey) OFF(ibv_send_wr, bind_mw.mw) \
	OFF(ibv_send_wr, bind_mw.rkey) OFF(ibv_send_wr, bind_mw.bind_info) \
	SIZE(ibv_recv_wr) OFF(ibv_recv_wr, wr_id) OFF(ibv_recv_wr, next) OFF(ibv_recv_wr, sg_list) OFF(ibv_recv_wr, num_sge) \
	SIZE(ibv_wc) OFF(ibv_wc, wr_id) OFF(ibv_wc, status) OFF(ibv_wc, opcode) OFF(ibv_wc, vendor_err) OFF(ibv_wc, byte_len) \
	OFF(ibv_wc, imm_data) OFF(ibv_wc, qp_num) OFF(ibv_wc, src_qp) OFF(ibv_wc, wc_flags) OFF(ibv_wc, pkey_index) \
	OFF(ibv_wc, slid) OFF(ibv_wc, sl) OFF(ibv_wc, dlid_path_bits) \
	SIZE(ibv_mw_bind) OFF(ibv_mw_bind, wr_id) OFF(ibv_mw_bind, send_flags) OFF(ibv_mw_bind, bind_info) \
	SIZE(ibv_mw_bind_info) OFF(ibv_mw_bind_info, mr) OFF(ibv_mw_bind_info, addr) OFF(ibv_mw_bind_info, length) \
	OFF(ibv_mw_bind_info, mw_access_flags) \
	SIZE(ibv_data_buf) OFF(ibv_data_buf, addr) OFF(ibv_data_buf, length) \
	SIZE(ibv_device_attr) OFF(ibv_device_attr, fw_ver) OFF(ibv_device_attr, node_guid) OFF(ibv_device_attr, sys_image_guid) \
	OFF(ibv_device_attr, max_mr_size) OFF(ibv_device_attr, page_size_cap) OFF(ibv_device_attr, vendor_id) \
	OFF(ibv_device_attr, vendor_part_id) OFF(ibv_device_attr, hw_ver) OFF(ibv_device_attr, max_qp) \
	OFF(ibv_device_attr, max_qp_wr) OFF(ibv_device_attr, device_cap_flags) OFF(ibv_device_attr, max_sge) \
	OFF(ibv_device_attr, max_sge_rd) OFF(ibv_device_attr, max_cq) OFF(ibv_device_attr, max_cqe) OFF(ibv_device_attr, max_mr) \
	OFF(ibv_device_attr, max_pd) OFF(ibv_device_attr, max_qp_rd_atom) OFF(ibv_device_attr, max_ee_rd_atom) \
	OFF(ibv_device_attr, max_res_rd_atom) OFF(ibv_device_attr, max_qp_init_rd_atom) OFF(ibv_device_attr, max_ee_init_rd_atom) \
	OFF(ibv_device_attr, atomic_cap) OFF(ibv_device_attr, max_ee) OFF(ibv_device_attr, max_rdd) OFF(ibv_device_attr, max_mw) \
	OFF(ibv_device_attr, max_raw_ipv6_qp) OFF(ibv_device_attr, max_raw_ethy_qp) OFF(ibv_device_attr, max_mcast_grp) \
	OFF(ibv_device_attr, max_mcast_qp_attach) OFF(ibv_device_attr, max_total_mcast_qp_attach) OFF(ibv_device_attr, max_ah) \
	OFF(ibv_device_attr, max_fmr) OFF(ibv_device_attr, max_map_per_fmr) OFF(ibv_device_attr, max_srq) \
	OFF(ibv_device_attr, max_srq_wr) OFF(ibv_device_attr, max_srq_sge) OFF(ibv_device_attr, max_pkeys) \
	OFF(ibv_device_attr, local_ca_ack_delay) OFF(ibv_device_attr, phys_port_cnt) \
	SIZE(ibv_device_attr_ex) OFF(ibv_device_attr_ex, orig_attr) OFF(ibv_device_attr_ex, device_cap_flags_ex) \
	OFF(ibv_device_attr_ex, phys_port_cnt_ex) SIZE(ibv_query_device_ex_input) OFF(ibv_query_device_ex_input, comp_mask) \
	SIZE(ibv_port_attr) OFF(ibv_port_attr, state) OFF(ibv_port_attr, max_mtu) OFF(ibv_port_attr, active_mtu) \
	OFF(ibv_port_attr, gid_tbl_len) OFF(ibv_port_attr, port_cap_flags) OFF(ibv_port_attr, max_msg_sz) \
	OFF(ibv_port_attr, bad_pkey_cntr) OFF(ibv_port_attr, qkey_viol_cntr) OFF(ibv_port_attr, pkey_tbl_len) \
	OFF(ibv_port_attr, lid) OFF(ibv_port_attr, sm_lid) OFF(ibv_port_attr, lmc) OFF(ibv_port_attr, max_vl_num) \
	OFF(ibv_port_attr, sm_sl) OFF(ibv_port_attr, subnet_timeout) OFF(ibv_port_attr, init_type_reply) \
	OFF(ibv_port_attr, active_width) OFF(ibv_port_attr, active_speed) OFF(ibv_port_attr, phys_state) \
	OFF(ibv_port_attr, link_layer) OFF(ibv_port_attr, flags) OFF(ibv_port_attr, port_cap_flags2) \
	SIZE(ibv_global_route) OFF(ibv_global_route, dgid) OFF(ibv_global_route, flow_label) OFF(ibv_global_route, sgid_index) \
	OFF(ibv_global_route, hop_limit) OFF(ibv_global_route, traffic_class) \
	SIZE(ibv_ah_attr) OFF(ibv_ah_attr, grh) OFF(ibv_ah_attr, dlid) OFF(ibv_ah_attr, sl) OFF(ibv_ah_attr, src_path_bits) \
	OFF(ibv_ah_attr, static_rate) OFF(ibv_ah_attr, is_global) OFF(ibv_ah_attr, port_num) \
	SIZE(ibv_qp_cap) OFF(ibv_qp_cap, max_send_wr) OFF(ibv_qp_cap, max_recv_wr) OFF(ibv_qp_cap, max_send_sge) \
	OFF(ibv_qp_cap, max_recv_sge) OFF(ibv_qp_cap, max_inline_data) \
	SIZE(ibv_qp_attr) OFF(ibv_qp_attr, qp_state) OFF(ibv_qp_attr, cur_qp_state) OFF(ibv_qp_attr, path_mtu) \
	OFF(ibv_qp_attr, path_mig_state) OFF(ibv_qp_attr, qkey) OFF(ibv_qp_attr, rq_psn) OFF(ibv_qp_attr, sq_psn) \
	OFF(ibv_qp_attr, dest_qp_num) OFF(ibv_qp_attr, qp_access_flags) OFF(ibv_qp_attr, cap) OFF(ibv_qp_attr, ah_attr) \
	OFF(ibv_qp_attr, alt_ah_attr) OFF(ibv_qp_attr, pkey_index) OFF(ibv_qp_attr, alt_pkey_index) \
	OFF(ibv_qp_attr, en_sqd_async_notify) OFF(ibv_qp_attr, sq_draining) OFF(ibv_qp_attr, max_rd_atomic) \
	OFF(ibv_qp_attr, max_dest_rd_atomic) OFF(ibv_qp_attr, min_rnr_timer) OFF(ibv_qp_attr, port_num) \
	OFF(ibv_qp_attr, timeout) OFF(ibv_qp_attr, retry_cnt) OFF(ibv_qp_attr, rnr_retry) OFF(ibv_qp_attr, alt_port_num) \
	OFF(ibv_qp_attr, alt_timeout) OFF(ibv_qp_attr, rate_limit) \
	SIZE(ibv_qp_init_attr) OFF(ibv_qp_init_attr, qp_context) OFF(ibv_qp_init_attr, send_cq) OFF(ibv_qp_init_attr, recv_cq) \
	OFF(ibv_qp_init_attr, srq) OFF(ibv_qp_init_attr, cap) OFF(ibv_qp_init_attr, qp_type) OFF(ibv_qp_init_attr, sq_sig_all) \
	SIZE(ibv_qp_init_attr_ex) OFF(ibv_qp_init_attr_ex, qp_context) OFF(ibv_qp_init_attr_ex, send_cq) \
	OFF(ibv_qp_init_attr_ex, recv_cq) OFF(ibv_qp_init_attr_ex, srq) OFF(ibv_qp_init_attr_ex, cap) \
	OFF(ibv_qp_init_attr_ex, qp_type) OFF(ibv_qp_init_attr_ex, sq_sig_all) OFF(ibv_qp_init_attr_ex, comp_mask) \
	OFF(ibv_qp_init_attr_ex, pd) OFF(ibv_qp_init_attr_ex, create_flags) \
	SIZE(ibv_srq_attr) OFF(ibv_srq_attr, max_wr) OFF(ibv_srq_attr, max_sge) OFF(ibv_srq_attr, srq_limit) \
	SIZE(ibv_srq_init_attr) OFF(ibv_srq_init_attr, srq_context) OFF(ibv_srq_init_attr, attr) \
	SIZE(ibv_async_event) OFF(ibv_async_event, element) OFF(ibv_async_event, event_type) \
	SIZE(ibv_gid_entry) OFF(ibv_gid_entry, gid) OFF(ibv_gid_entry, gid_index) OFF(ibv_gid_entry, port_num) \
	OFF(ibv_gid_entry, gid_type) OFF(ibv_gid_entry, ndev_ifindex)

struct rgo_layout_entry {
	const char *name;
	unsigned long value;
};

#define RGO_LAYOUT_OFF(s, m) {#s "." #m, offsetof(struct s, m)},
#define RGO_LAYOUT_SIZE(s) {"sizeof " #s, sizeof(struct s)},
