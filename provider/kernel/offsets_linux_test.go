//go:build linux

package kernel

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/rdma-go/rdma-go/provider"
)

// layout is one fact about a C structure the provider relies on: the
// offsetof (or sizeof, when Field is "") that C gives and the one Go uses.
type layout struct {
	Struct, Field string
	Go            uintptr
}

func layouts() []layout {
	var (
		da  cDeviceAttr
		pa  cPortAttr
		sge cSGE
		sw  cSendWR
		rw  cRecvWR
		wc  cWC
		gr  cGlobalRoute
		ah  cAHAttr
		qc  cQPCap
		qi  cQPInitAttr
		qa  cQPAttr
		sa  cSRQAttr
		si  cSRQInitAttr
		ae  cAsyncEvent
	)
	return []layout{
		{"ibv_device_attr", "", unsafe.Sizeof(da)},
		{"ibv_device_attr", "fw_ver", unsafe.Offsetof(da.FWVer)},
		{"ibv_device_attr", "node_guid", unsafe.Offsetof(da.NodeGUID)},
		{"ibv_device_attr", "sys_image_guid", unsafe.Offsetof(da.SysImageGUID)},
		{"ibv_device_attr", "max_mr_size", unsafe.Offsetof(da.MaxMRSize)},
		{"ibv_device_attr", "page_size_cap", unsafe.Offsetof(da.PageSizeCap)},
		{"ibv_device_attr", "vendor_id", unsafe.Offsetof(da.VendorID)},
		{"ibv_device_attr", "vendor_part_id", unsafe.Offsetof(da.VendorPartID)},
		{"ibv_device_attr", "hw_ver", unsafe.Offsetof(da.HWVer)},
		{"ibv_device_attr", "max_qp", unsafe.Offsetof(da.MaxQP)},
		{"ibv_device_attr", "max_qp_wr", unsafe.Offsetof(da.MaxQPWR)},
		{"ibv_device_attr", "device_cap_flags", unsafe.Offsetof(da.DeviceCapFlags)},
		{"ibv_device_attr", "max_sge", unsafe.Offsetof(da.MaxSGE)},
		{"ibv_device_attr", "max_sge_rd", unsafe.Offsetof(da.MaxSGERD)},
		{"ibv_device_attr", "max_cq", unsafe.Offsetof(da.MaxCQ)},
		{"ibv_device_attr", "max_cqe", unsafe.Offsetof(da.MaxCQE)},
		{"ibv_device_attr", "max_mr", unsafe.Offsetof(da.MaxMR)},
		{"ibv_device_attr", "max_pd", unsafe.Offsetof(da.MaxPD)},
		{"ibv_device_attr", "max_qp_rd_atom", unsafe.Offsetof(da.MaxQPRDAtom)},
		{"ibv_device_attr", "max_ee_rd_atom", unsafe.Offsetof(da.MaxEERDAtom)},
		{"ibv_device_attr", "max_res_rd_atom", unsafe.Offsetof(da.MaxResRDAtom)},
		{"ibv_device_attr", "max_qp_init_rd_atom", unsafe.Offsetof(da.MaxQPInitRDAtom)},
		{"ibv_device_attr", "max_ee_init_rd_atom", unsafe.Offsetof(da.MaxEEInitRDAtom)},
		{"ibv_device_attr", "atomic_cap", unsafe.Offsetof(da.AtomicCap)},
		{"ibv_device_attr", "max_ee", unsafe.Offsetof(da.MaxEE)},
		{"ibv_device_attr", "max_rdd", unsafe.Offsetof(da.MaxRDD)},
		{"ibv_device_attr", "max_mw", unsafe.Offsetof(da.MaxMW)},
		{"ibv_device_attr", "max_raw_ipv6_qp", unsafe.Offsetof(da.MaxRawIPv6QP)},
		{"ibv_device_attr", "max_raw_ethy_qp", unsafe.Offsetof(da.MaxRawEthyQP)},
		{"ibv_device_attr", "max_mcast_grp", unsafe.Offsetof(da.MaxMcastGrp)},
		{"ibv_device_attr", "max_mcast_qp_attach", unsafe.Offsetof(da.MaxMcastQPAttach)},
		{"ibv_device_attr", "max_total_mcast_qp_attach", unsafe.Offsetof(da.MaxTotalMcastQPAttach)},
		{"ibv_device_attr", "max_ah", unsafe.Offsetof(da.MaxAH)},
		{"ibv_device_attr", "max_fmr", unsafe.Offsetof(da.MaxFMR)},
		{"ibv_device_attr", "max_map_per_fmr", unsafe.Offsetof(da.MaxMapPerFMR)},
		{"ibv_device_attr", "max_srq", unsafe.Offsetof(da.MaxSRQ)},
		{"ibv_device_attr", "max_srq_wr", unsafe.Offsetof(da.MaxSRQWR)},
		{"ibv_device_attr", "max_srq_sge", unsafe.Offsetof(da.MaxSRQSGE)},
		{"ibv_device_attr", "max_pkeys", unsafe.Offsetof(da.MaxPKeys)},
		{"ibv_device_attr", "local_ca_ack_delay", unsafe.Offsetof(da.LocalCAAckDelay)},
		{"ibv_device_attr", "phys_port_cnt", unsafe.Offsetof(da.PhysPortCnt)},

		{"ibv_port_attr", "", unsafe.Sizeof(pa)},
		{"ibv_port_attr", "state", unsafe.Offsetof(pa.State)},
		{"ibv_port_attr", "max_mtu", unsafe.Offsetof(pa.MaxMTU)},
		{"ibv_port_attr", "active_mtu", unsafe.Offsetof(pa.ActiveMTU)},
		{"ibv_port_attr", "gid_tbl_len", unsafe.Offsetof(pa.GIDTblLen)},
		{"ibv_port_attr", "port_cap_flags", unsafe.Offsetof(pa.PortCapFlags)},
		{"ibv_port_attr", "max_msg_sz", unsafe.Offsetof(pa.MaxMsgSz)},
		{"ibv_port_attr", "bad_pkey_cntr", unsafe.Offsetof(pa.BadPKeyCntr)},
		{"ibv_port_attr", "qkey_viol_cntr", unsafe.Offsetof(pa.QKeyViolCntr)},
		{"ibv_port_attr", "pkey_tbl_len", unsafe.Offsetof(pa.PKeyTblLen)},
		{"ibv_port_attr", "lid", unsafe.Offsetof(pa.LID)},
		{"ibv_port_attr", "sm_lid", unsafe.Offsetof(pa.SMLID)},
		{"ibv_port_attr", "lmc", unsafe.Offsetof(pa.LMC)},
		{"ibv_port_attr", "max_vl_num", unsafe.Offsetof(pa.MaxVLNum)},
		{"ibv_port_attr", "sm_sl", unsafe.Offsetof(pa.SMSL)},
		{"ibv_port_attr", "subnet_timeout", unsafe.Offsetof(pa.SubnetTimeout)},
		{"ibv_port_attr", "init_type_reply", unsafe.Offsetof(pa.InitTypeReply)},
		{"ibv_port_attr", "active_width", unsafe.Offsetof(pa.ActiveWidth)},
		{"ibv_port_attr", "active_speed", unsafe.Offsetof(pa.ActiveSpeed)},
		{"ibv_port_attr", "phys_state", unsafe.Offsetof(pa.PhysState)},
		{"ibv_port_attr", "link_layer", unsafe.Offsetof(pa.LinkLayer)},
		{"ibv_port_attr", "flags", unsafe.Offsetof(pa.Flags)},
		{"ibv_port_attr", "port_cap_flags2", unsafe.Offsetof(pa.PortCapFlags2)},

		{"ibv_sge", "", unsafe.Sizeof(sge)},
		{"ibv_sge", "addr", unsafe.Offsetof(sge.Addr)},
		{"ibv_sge", "length", unsafe.Offsetof(sge.Length)},
		{"ibv_sge", "lkey", unsafe.Offsetof(sge.LKey)},

		{"ibv_send_wr", "", unsafe.Sizeof(sw)},
		{"ibv_send_wr", "wr_id", unsafe.Offsetof(sw.WRID)},
		{"ibv_send_wr", "next", unsafe.Offsetof(sw.Next)},
		{"ibv_send_wr", "sg_list", unsafe.Offsetof(sw.SGList)},
		{"ibv_send_wr", "num_sge", unsafe.Offsetof(sw.NumSGE)},
		{"ibv_send_wr", "opcode", unsafe.Offsetof(sw.Opcode)},
		{"ibv_send_wr", "send_flags", unsafe.Offsetof(sw.SendFlags)},
		{"ibv_send_wr", "imm_data", unsafe.Offsetof(sw.ImmData)},
		{"ibv_send_wr", "invalidate_rkey", unsafe.Offsetof(sw.ImmData)},
		{"ibv_send_wr", "wr.rdma.remote_addr", unsafe.Offsetof(sw.RemoteAddr)},
		{"ibv_send_wr", "wr.rdma.rkey", unsafe.Offsetof(sw.RKey)},
		{"ibv_send_wr", "wr.atomic.remote_addr", unsafe.Offsetof(sw.RemoteAddr)},
		{"ibv_send_wr", "wr.atomic.compare_add", unsafe.Offsetof(sw.RKey)},
		{"ibv_send_wr", "wr.atomic.swap", unsafe.Offsetof(sw.Swap)},
		{"ibv_send_wr", "wr.atomic.rkey", unsafe.Offsetof(sw.AtomicRKey)},
		{"ibv_send_wr", "wr.ud.ah", unsafe.Offsetof(sw.RemoteAddr)},
		{"ibv_send_wr", "wr.ud.remote_qpn", unsafe.Offsetof(sw.RKey)},
		{"ibv_send_wr", "wr.ud.remote_qkey", unsafe.Offsetof(sw.Word52)},
		{"ibv_send_wr", "qp_type.xrc.remote_srqn", unsafe.Offsetof(sw.RemoteSRQN)},
		{"ibv_send_wr", "bind_mw.mw", unsafe.Offsetof(sw.MW)},
		{"ibv_send_wr", "bind_mw.rkey", unsafe.Offsetof(sw.BindRKey)},
		{"ibv_send_wr", "bind_mw.bind_info.mr", unsafe.Offsetof(sw.BindMR)},
		{"ibv_send_wr", "bind_mw.bind_info.addr", unsafe.Offsetof(sw.BindAddr)},
		{"ibv_send_wr", "bind_mw.bind_info.length", unsafe.Offsetof(sw.BindLength)},
		{"ibv_send_wr", "bind_mw.bind_info.mw_access_flags", unsafe.Offsetof(sw.BindAccess)},

		{"ibv_recv_wr", "", unsafe.Sizeof(rw)},
		{"ibv_recv_wr", "wr_id", unsafe.Offsetof(rw.WRID)},
		{"ibv_recv_wr", "next", unsafe.Offsetof(rw.Next)},
		{"ibv_recv_wr", "sg_list", unsafe.Offsetof(rw.SGList)},
		{"ibv_recv_wr", "num_sge", unsafe.Offsetof(rw.NumSGE)},

		{"ibv_wc", "", unsafe.Sizeof(wc)},
		{"ibv_wc", "wr_id", unsafe.Offsetof(wc.WRID)},
		{"ibv_wc", "status", unsafe.Offsetof(wc.Status)},
		{"ibv_wc", "opcode", unsafe.Offsetof(wc.Opcode)},
		{"ibv_wc", "vendor_err", unsafe.Offsetof(wc.VendorErr)},
		{"ibv_wc", "byte_len", unsafe.Offsetof(wc.ByteLen)},
		{"ibv_wc", "imm_data", unsafe.Offsetof(wc.ImmData)},
		{"ibv_wc", "invalidated_rkey", unsafe.Offsetof(wc.ImmData)},
		{"ibv_wc", "qp_num", unsafe.Offsetof(wc.QPNum)},
		{"ibv_wc", "src_qp", unsafe.Offsetof(wc.SrcQP)},
		{"ibv_wc", "wc_flags", unsafe.Offsetof(wc.WCFlags)},
		{"ibv_wc", "pkey_index", unsafe.Offsetof(wc.PKeyIndex)},
		{"ibv_wc", "slid", unsafe.Offsetof(wc.SLID)},
		{"ibv_wc", "sl", unsafe.Offsetof(wc.SL)},
		{"ibv_wc", "dlid_path_bits", unsafe.Offsetof(wc.DLIDPathBits)},

		{"ibv_global_route", "", unsafe.Sizeof(gr)},
		{"ibv_global_route", "dgid", unsafe.Offsetof(gr.DGID)},
		{"ibv_global_route", "flow_label", unsafe.Offsetof(gr.FlowLabel)},
		{"ibv_global_route", "sgid_index", unsafe.Offsetof(gr.SGIDIndex)},
		{"ibv_global_route", "hop_limit", unsafe.Offsetof(gr.HopLimit)},
		{"ibv_global_route", "traffic_class", unsafe.Offsetof(gr.TrafficClass)},

		{"ibv_ah_attr", "", unsafe.Sizeof(ah)},
		{"ibv_ah_attr", "grh", unsafe.Offsetof(ah.GRH)},
		{"ibv_ah_attr", "dlid", unsafe.Offsetof(ah.DLID)},
		{"ibv_ah_attr", "sl", unsafe.Offsetof(ah.SL)},
		{"ibv_ah_attr", "src_path_bits", unsafe.Offsetof(ah.SrcPathBits)},
		{"ibv_ah_attr", "static_rate", unsafe.Offsetof(ah.StaticRate)},
		{"ibv_ah_attr", "is_global", unsafe.Offsetof(ah.IsGlobal)},
		{"ibv_ah_attr", "port_num", unsafe.Offsetof(ah.PortNum)},

		{"ibv_qp_cap", "", unsafe.Sizeof(qc)},
		{"ibv_qp_cap", "max_send_wr", unsafe.Offsetof(qc.MaxSendWR)},
		{"ibv_qp_cap", "max_recv_wr", unsafe.Offsetof(qc.MaxRecvWR)},
		{"ibv_qp_cap", "max_send_sge", unsafe.Offsetof(qc.MaxSendSGE)},
		{"ibv_qp_cap", "max_recv_sge", unsafe.Offsetof(qc.MaxRecvSGE)},
		{"ibv_qp_cap", "max_inline_data", unsafe.Offsetof(qc.MaxInlineData)},

		{"ibv_qp_init_attr", "", unsafe.Sizeof(qi)},
		{"ibv_qp_init_attr", "qp_context", unsafe.Offsetof(qi.QPContext)},
		{"ibv_qp_init_attr", "send_cq", unsafe.Offsetof(qi.SendCQ)},
		{"ibv_qp_init_attr", "recv_cq", unsafe.Offsetof(qi.RecvCQ)},
		{"ibv_qp_init_attr", "srq", unsafe.Offsetof(qi.SRQ)},
		{"ibv_qp_init_attr", "cap", unsafe.Offsetof(qi.Cap)},
		{"ibv_qp_init_attr", "qp_type", unsafe.Offsetof(qi.QPType)},
		{"ibv_qp_init_attr", "sq_sig_all", unsafe.Offsetof(qi.SQSigAll)},

		{"ibv_qp_attr", "", unsafe.Sizeof(qa)},
		{"ibv_qp_attr", "qp_state", unsafe.Offsetof(qa.QPState)},
		{"ibv_qp_attr", "cur_qp_state", unsafe.Offsetof(qa.CurQPState)},
		{"ibv_qp_attr", "path_mtu", unsafe.Offsetof(qa.PathMTU)},
		{"ibv_qp_attr", "path_mig_state", unsafe.Offsetof(qa.PathMigState)},
		{"ibv_qp_attr", "qkey", unsafe.Offsetof(qa.QKey)},
		{"ibv_qp_attr", "rq_psn", unsafe.Offsetof(qa.RQPSN)},
		{"ibv_qp_attr", "sq_psn", unsafe.Offsetof(qa.SQPSN)},
		{"ibv_qp_attr", "dest_qp_num", unsafe.Offsetof(qa.DestQPNum)},
		{"ibv_qp_attr", "qp_access_flags", unsafe.Offsetof(qa.QPAccessFlags)},
		{"ibv_qp_attr", "cap", unsafe.Offsetof(qa.Cap)},
		{"ibv_qp_attr", "ah_attr", unsafe.Offsetof(qa.AHAttr)},
		{"ibv_qp_attr", "alt_ah_attr", unsafe.Offsetof(qa.AltAHAttr)},
		{"ibv_qp_attr", "pkey_index", unsafe.Offsetof(qa.PKeyIndex)},
		{"ibv_qp_attr", "alt_pkey_index", unsafe.Offsetof(qa.AltPKeyIndex)},
		{"ibv_qp_attr", "en_sqd_async_notify", unsafe.Offsetof(qa.EnSQDAsyncNotify)},
		{"ibv_qp_attr", "sq_draining", unsafe.Offsetof(qa.SQDraining)},
		{"ibv_qp_attr", "max_rd_atomic", unsafe.Offsetof(qa.MaxRDAtomic)},
		{"ibv_qp_attr", "max_dest_rd_atomic", unsafe.Offsetof(qa.MaxDestRDAtomic)},
		{"ibv_qp_attr", "min_rnr_timer", unsafe.Offsetof(qa.MinRNRTimer)},
		{"ibv_qp_attr", "port_num", unsafe.Offsetof(qa.PortNum)},
		{"ibv_qp_attr", "timeout", unsafe.Offsetof(qa.Timeout)},
		{"ibv_qp_attr", "retry_cnt", unsafe.Offsetof(qa.RetryCnt)},
		{"ibv_qp_attr", "rnr_retry", unsafe.Offsetof(qa.RNRRetry)},
		{"ibv_qp_attr", "alt_port_num", unsafe.Offsetof(qa.AltPortNum)},
		{"ibv_qp_attr", "alt_timeout", unsafe.Offsetof(qa.AltTimeout)},
		{"ibv_qp_attr", "rate_limit", unsafe.Offsetof(qa.RateLimit)},

		{"ibv_srq_attr", "", unsafe.Sizeof(sa)},
		{"ibv_srq_attr", "max_wr", unsafe.Offsetof(sa.MaxWR)},
		{"ibv_srq_attr", "max_sge", unsafe.Offsetof(sa.MaxSGE)},
		{"ibv_srq_attr", "srq_limit", unsafe.Offsetof(sa.SRQLimit)},
		{"ibv_srq_init_attr", "", unsafe.Sizeof(si)},
		{"ibv_srq_init_attr", "srq_context", unsafe.Offsetof(si.SRQContext)},
		{"ibv_srq_init_attr", "attr", unsafe.Offsetof(si.Attr)},

		{"ibv_async_event", "", unsafe.Sizeof(ae)},
		{"ibv_async_event", "element", unsafe.Offsetof(ae.Element)},
		{"ibv_async_event", "event_type", unsafe.Offsetof(ae.EventType)},

		{"ibv_context", "ops.alloc_mw", ctxOpsAllocMW},
		{"ibv_context", "ops.bind_mw", ctxOpsBindMW},
		{"ibv_context", "ops.dealloc_mw", ctxOpsDeallocMW},
		{"ibv_context", "ops.poll_cq", ctxOpsPollCQ},
		{"ibv_context", "ops.req_notify_cq", ctxOpsReqNotifyCQ},
		{"ibv_context", "ops.post_srq_recv", ctxOpsPostSRQRecv},
		{"ibv_context", "ops.post_send", ctxOpsPostSend},
		{"ibv_context", "ops.post_recv", ctxOpsPostRecv},
		{"ibv_context", "async_fd", ctxAsyncFD},
		{"ibv_context", "num_comp_vectors", ctxNumCompVectors},
		{"ibv_comp_channel", "fd", compChannelFD},
		{"ibv_cq", "cqe", cqCQE},
		{"ibv_qp", "qp_num", qpQPNum},
		{"ibv_qp", "state", qpState},
		{"ibv_mr", "addr", mrAddr},
		{"ibv_mr", "lkey", mrLKey},
		{"ibv_mr", "rkey", mrRKey},
		{"ibv_mw", "rkey", mwRKey},
		{"ibv_qp", "handle", qpHandle},
		{"ibv_context", "cmd_fd", ctxCmdFD},
		{"ibv_qp_ex", "", sizeofQPEx},
		{"ibv_cq_ex", "", sizeofCQEx},
	}
}

// rxeLayouts are the facts of <rdma/rdma_user_rxe.h> (the kernel's ABI
// for rxe's rings) and of the uverbs write command the rxe fast path
// relies on.
func rxeLayouts() []layout {
	var (
		sw rxeSendWQE
		rw rxeRecvWQE
		dm rxeDMA
		ps cPostSend
		wc cWC
	)
	return []layout{
		{"rxe_send_wqe", "", unsafe.Sizeof(sw)},
		{"rxe_send_wqe", "wr.wr_id", unsafe.Offsetof(sw.WRID)},
		{"rxe_send_wqe", "wr.opcode", unsafe.Offsetof(sw.Opcode)},
		{"rxe_send_wqe", "wr.send_flags", unsafe.Offsetof(sw.SendFlags)},
		{"rxe_send_wqe", "wr.ex.imm_data", unsafe.Offsetof(sw.Ex)},
		{"rxe_send_wqe", "wr.ex.invalidate_rkey", unsafe.Offsetof(sw.Ex)},
		{"rxe_send_wqe", "wr.wr.rdma.remote_addr", unsafe.Offsetof(sw.RemoteAddr)},
		{"rxe_send_wqe", "wr.wr.rdma.rkey", unsafe.Offsetof(sw.CompareAdd)},
		{"rxe_send_wqe", "wr.wr.atomic.remote_addr", unsafe.Offsetof(sw.RemoteAddr)},
		{"rxe_send_wqe", "wr.wr.atomic.compare_add", unsafe.Offsetof(sw.CompareAdd)},
		{"rxe_send_wqe", "wr.wr.atomic.swap", unsafe.Offsetof(sw.Swap)},
		{"rxe_send_wqe", "wr.wr.atomic.rkey", unsafe.Offsetof(sw.AtomicRKey)},
		{"rxe_send_wr", "", unsafe.Offsetof(sw.Status)},
		{"rxe_send_wqe", "status", unsafe.Offsetof(sw.Status)},
		{"rxe_send_wqe", "state", unsafe.Offsetof(sw.State)},
		{"rxe_send_wqe", "iova", unsafe.Offsetof(sw.IOVA)},
		{"rxe_send_wqe", "mask", unsafe.Offsetof(sw.Mask)},
		{"rxe_send_wqe", "ssn", unsafe.Offsetof(sw.SSN)},
		{"rxe_send_wqe", "has_rd_atomic", unsafe.Offsetof(sw.HasRDAtom)},
		{"rxe_send_wqe", "dma", unsafe.Offsetof(sw.DMA)},
		{"rxe_send_wqe", "dma.sge", unsafe.Sizeof(sw)},
		{"rxe_send_wqe", "dma.inline_data", unsafe.Sizeof(sw)},
		{"rxe_recv_wqe", "", unsafe.Sizeof(rw)},
		{"rxe_recv_wqe", "wr_id", unsafe.Offsetof(rw.WRID)},
		{"rxe_recv_wqe", "dma", unsafe.Offsetof(rw.DMA)},
		{"rxe_recv_wqe", "dma.sge", unsafe.Sizeof(rw)},
		{"rxe_dma_info", "", unsafe.Sizeof(dm)},
		{"rxe_dma_info", "length", unsafe.Offsetof(dm.Length)},
		{"rxe_dma_info", "resid", unsafe.Offsetof(dm.Resid)},
		{"rxe_dma_info", "cur_sge", unsafe.Offsetof(dm.CurSGE)},
		{"rxe_dma_info", "num_sge", unsafe.Offsetof(dm.NumSGE)},
		{"rxe_dma_info", "sge_offset", unsafe.Offsetof(dm.SGEOffset)},
		{"rxe_sge", "", unsafe.Sizeof(cSGE{})},
		{"mminfo", "size", 8},
		{"rxe_queue_buf", "log2_elem_size", rxeQLog2ElemSize},
		{"rxe_queue_buf", "index_mask", rxeQIndexMask},
		{"rxe_queue_buf", "producer_index", rxeQProducer},
		{"rxe_queue_buf", "consumer_index", rxeQConsumer},
		{"rxe_queue_buf", "data", rxeQData},
		{"ib_uverbs_post_send", "", unsafe.Offsetof(ps.Resp) - unsafe.Offsetof(ps.Response)},
		{"ib_uverbs_cmd_hdr", "", unsafe.Offsetof(ps.Response)},
		{"ib_uverbs_post_send", "qp_handle", unsafe.Offsetof(ps.QPHandle) - 8},
		{"ib_uverbs_post_send", "wqe_size", unsafe.Offsetof(ps.WQESize) - 8},
		{"ib_uverbs_post_send_resp", "", 4},
		// rxe's completion ring holds struct ib_uverbs_wc, which the
		// fast path reads as struct ibv_wc (cWC).
		{"ib_uverbs_wc", "", unsafe.Sizeof(wc)},
		{"ib_uverbs_wc", "wr_id", unsafe.Offsetof(wc.WRID)},
		{"ib_uverbs_wc", "status", unsafe.Offsetof(wc.Status)},
		{"ib_uverbs_wc", "opcode", unsafe.Offsetof(wc.Opcode)},
		{"ib_uverbs_wc", "vendor_err", unsafe.Offsetof(wc.VendorErr)},
		{"ib_uverbs_wc", "byte_len", unsafe.Offsetof(wc.ByteLen)},
		{"ib_uverbs_wc", "ex.imm_data", unsafe.Offsetof(wc.ImmData)},
		{"ib_uverbs_wc", "qp_num", unsafe.Offsetof(wc.QPNum)},
		{"ib_uverbs_wc", "src_qp", unsafe.Offsetof(wc.SrcQP)},
		{"ib_uverbs_wc", "wc_flags", unsafe.Offsetof(wc.WCFlags)},
		{"ib_uverbs_wc", "pkey_index", unsafe.Offsetof(wc.PKeyIndex)},
		{"ib_uverbs_wc", "slid", unsafe.Offsetof(wc.SLID)},
		{"ib_uverbs_wc", "sl", unsafe.Offsetof(wc.SL)},
		{"ib_uverbs_wc", "dlid_path_bits", unsafe.Offsetof(wc.DLIDPathBits)},
	}
}

// cmLayouts are the facts of <rdma/rdma_cma.h> and <infiniband/sa.h> the
// kernel CM relies on.
func cmLayouts() []layout {
	var (
		cp cConnParam
		up cUDParam
	)
	return []layout{
		{"rdma_cm_id", "verbs", cmIDVerbs},
		{"rdma_cm_id", "route.addr.src_addr", cmIDSrcAddr},
		{"rdma_cm_id", "route.addr.dst_addr", cmIDDstAddr},
		{"rdma_cm_id", "route.path_rec", cmIDPathRec},
		{"rdma_cm_id", "route.num_paths", cmIDNumPaths},
		{"rdma_cm_id", "port_num", cmIDPortNum},
		{"rdma_cm_event", "id", cmEvID},
		{"rdma_cm_event", "listen_id", cmEvListenID},
		{"rdma_cm_event", "event", cmEvEvent},
		{"rdma_cm_event", "status", cmEvStatus},
		{"rdma_cm_event", "param", cmEvParam},
		{"rdma_conn_param", "", unsafe.Sizeof(cp)},
		{"rdma_conn_param", "private_data_len", unsafe.Offsetof(cp.PrivateDataLen)},
		{"rdma_conn_param", "responder_resources", unsafe.Offsetof(cp.RespRes)},
		{"rdma_conn_param", "initiator_depth", unsafe.Offsetof(cp.InitDepth)},
		{"rdma_conn_param", "flow_control", unsafe.Offsetof(cp.FlowControl)},
		{"rdma_conn_param", "retry_count", unsafe.Offsetof(cp.RetryCount)},
		{"rdma_conn_param", "rnr_retry_count", unsafe.Offsetof(cp.RNRRetryCount)},
		{"rdma_conn_param", "srq", unsafe.Offsetof(cp.SRQ)},
		{"rdma_conn_param", "qp_num", unsafe.Offsetof(cp.QPNum)},
		{"rdma_ud_param", "", unsafe.Sizeof(up)},
		{"rdma_ud_param", "private_data_len", unsafe.Offsetof(up.PrivateDataLen)},
		{"rdma_ud_param", "ah_attr", unsafe.Offsetof(up.AHAttr)},
		{"rdma_ud_param", "qp_num", unsafe.Offsetof(up.QPNum)},
		{"rdma_ud_param", "qkey", unsafe.Offsetof(up.QKey)},
		{"ibv_sa_path_rec", "dgid", pathDGID},
		{"ibv_sa_path_rec", "sgid", pathSGID},
		{"ibv_sa_path_rec", "flow_label", pathFlowLabel},
		{"ibv_sa_path_rec", "hop_limit", pathHopLimit},
		{"ibv_sa_path_rec", "traffic_class", pathTClass},
		{"ibv_sa_path_rec", "pkey", pathPKey},
		{"ibv_sa_path_rec", "sl", pathSL},
		{"ibv_sa_path_rec", "mtu", pathMTU},
		{"ibv_sa_path_rec", "packet_life_time", pathPLT},
		{"ibv_context", "device", ibvContextDevice},
	}
}

// cmEnums are the values of rdma_cma.h the kernel CM passes through.
var cmEnums = map[string]int64{
	"RDMA_CM_EVENT_CONNECT_REQUEST": cmEventConnectRequest,
	"RDMA_OPTION_ID_TOS":            int64(provider.CMOptionTOS), "RDMA_OPTION_ID_REUSEADDR": int64(provider.CMOptionReuseAddr),
	"RDMA_OPTION_ID_AFONLY": int64(provider.CMOptionAFOnly), "RDMA_OPTION_ID_ACK_TIMEOUT": int64(provider.CMOptionAckTimeout),
}

// cEnums are the enum values of verbs.h the provider passes through
// unconverted (provider's enums use libibverbs' numbering).
var cEnums = map[string]int64{
	"IBV_WR_RDMA_WRITE": int64(provider.WRRDMAWrite), "IBV_WR_RDMA_WRITE_WITH_IMM": int64(provider.WRRDMAWriteWithImm),
	"IBV_WR_SEND": int64(provider.WRSend), "IBV_WR_SEND_WITH_IMM": int64(provider.WRSendWithImm),
	"IBV_WR_RDMA_READ": int64(provider.WRRDMARead), "IBV_WR_ATOMIC_CMP_AND_SWP": int64(provider.WRAtomicCmpAndSwp),
	"IBV_WR_ATOMIC_FETCH_AND_ADD": int64(provider.WRAtomicFetchAndAdd), "IBV_WR_LOCAL_INV": int64(provider.WRLocalInv),
	"IBV_WR_BIND_MW": int64(provider.WRBindMW), "IBV_WR_SEND_WITH_INV": int64(provider.WRSendWithInv),
	"IBV_SEND_FENCE": int64(provider.SendFence), "IBV_SEND_SIGNALED": int64(provider.SendSignaled),
	"IBV_SEND_SOLICITED": int64(provider.SendSolicited), "IBV_SEND_INLINE": int64(provider.SendInline),
	"IBV_WC_SUCCESS": int64(provider.WCSuccess), "IBV_WC_WR_FLUSH_ERR": int64(provider.WCWRFlushErr),
	"IBV_WC_RETRY_EXC_ERR": int64(provider.WCRetryExcErr), "IBV_WC_SEND": int64(provider.WCSend),
	"IBV_WC_RDMA_READ": int64(provider.WCRDMARead), "IBV_WC_BIND_MW": int64(provider.WCBindMW),
	"IBV_WC_RECV": int64(provider.WCRecv), "IBV_WC_RECV_RDMA_WITH_IMM": int64(provider.WCRecvRDMAWithImm),
	"IBV_WC_GRH": int64(provider.WCFlagGRH), "IBV_WC_WITH_IMM": int64(provider.WCFlagWithImm),
	"IBV_WC_WITH_INV": int64(provider.WCFlagWithInv),
	"IBV_QPT_RC":      int64(provider.QPTypeRC), "IBV_QPT_UC": int64(provider.QPTypeUC), "IBV_QPT_UD": int64(provider.QPTypeUD),
	"IBV_QPS_RESET": int64(provider.QPStateReset), "IBV_QPS_INIT": int64(provider.QPStateInit),
	"IBV_QPS_RTR": int64(provider.QPStateRTR), "IBV_QPS_RTS": int64(provider.QPStateRTS),
	"IBV_QPS_SQD": int64(provider.QPStateSQD), "IBV_QPS_ERR": int64(provider.QPStateErr),
	"IBV_QP_STATE": int64(provider.QPAttrState), "IBV_QP_AV": int64(provider.QPAttrAV),
	"IBV_QP_PATH_MTU": int64(provider.QPAttrPathMTU), "IBV_QP_RQ_PSN": int64(provider.QPAttrRQPSN),
	"IBV_QP_SQ_PSN": int64(provider.QPAttrSQPSN), "IBV_QP_CAP": int64(provider.QPAttrCap),
	"IBV_QP_DEST_QPN": int64(provider.QPAttrDestQPN), "IBV_QP_RATE_LIMIT": int64(provider.QPAttrRateLimit),
	"IBV_ACCESS_LOCAL_WRITE": int64(provider.AccessLocalWrite), "IBV_ACCESS_REMOTE_WRITE": int64(provider.AccessRemoteWrite),
	"IBV_ACCESS_REMOTE_READ": int64(provider.AccessRemoteRead), "IBV_ACCESS_REMOTE_ATOMIC": int64(provider.AccessRemoteAtomic),
	"IBV_ACCESS_MW_BIND": int64(provider.AccessMWBind),
	"IBV_MTU_256":        int64(provider.MTU256), "IBV_MTU_4096": int64(provider.MTU4096),
	"IBV_PORT_ACTIVE": int64(provider.PortActive), "IBV_LINK_LAYER_ETHERNET": int64(provider.LinkLayerEthernet),
	"IBV_EVENT_CQ_ERR": int64(provider.EventCQErr), "IBV_EVENT_QP_FATAL": int64(provider.EventQPFatal),
	"IBV_EVENT_PORT_ACTIVE": int64(provider.EventPortActive), "IBV_EVENT_SRQ_LIMIT_REACHED": int64(provider.EventSRQLimitReached),
	"IBV_EVENT_GID_CHANGE": int64(provider.EventGIDChange),
	"IBV_SRQ_MAX_WR":       int64(provider.SRQMaxWR), "IBV_SRQ_LIMIT": int64(provider.SRQLimit),
	"IBV_MW_TYPE_1": int64(provider.MWType1), "IBV_MW_TYPE_2": int64(provider.MWType2),
}

// TestCLayouts compiles a C program against the system's verbs.h that
// prints offsetof and sizeof of every field the provider uses, and the
// enum values it relies on, and compares them with the Go side.
func TestCLayouts(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler")
		}
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		t.Skip("no <infiniband/verbs.h> (install libibverbs-dev)")
	}
	var src bytes.Buffer
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n")
	ls, enums := layouts(), cEnums
	if _, err := os.Stat("/usr/include/rdma/rdma_cma.h"); err == nil {
		src.WriteString("#include <rdma/rdma_cma.h>\n")
		ls = append(ls, cmLayouts()...)
		enums = maps.Clone(cEnums)
		maps.Copy(enums, cmEnums)
	} else {
		t.Log("no <rdma/rdma_cma.h> (install librdmacm-dev): the kernel CM's layouts are not checked")
	}
	if _, err := os.Stat("/usr/include/rdma/rdma_user_rxe.h"); err == nil {
		src.WriteString("#include <rdma/ib_user_verbs.h>\n#include <rdma/rdma_user_rxe.h>\n")
		ls = append(ls, rxeLayouts()...)
		enums = maps.Clone(enums)
		enums["IB_USER_VERBS_CMD_POST_SEND"] = ibUserVerbsCmdPostSend
	} else {
		t.Log("no <rdma/rdma_user_rxe.h>: the rxe fast path's layouts are not checked")
	}
	src.WriteString("int main(void) {\n")
	for _, l := range ls {
		if l.Field == "" {
			fmt.Fprintf(&src, "\tprintf(\"%%zu\\n\", sizeof(struct %s));\n", l.Struct)
		} else {
			fmt.Fprintf(&src, "\tprintf(\"%%zu\\n\", offsetof(struct %s, %s));\n", l.Struct, l.Field)
		}
	}
	var names []string
	for n := range enums {
		names = append(names, n)
		fmt.Fprintf(&src, "\tprintf(\"%%lld\\n\", (long long)%s);\n", n)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "l.c"), src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "l")
	if out, err := exec.Command(cc, "-o", bin, filepath.Join(dir, "l.c")).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	for sc.Scan() {
		v, _ := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
		switch {
		case i < len(ls):
			l := ls[i]
			what := "sizeof(struct " + l.Struct + ")"
			if l.Field != "" {
				what = "offsetof(struct " + l.Struct + ", " + l.Field + ")"
			}
			if uintptr(v) != l.Go {
				t.Errorf("%s = %d in C, %d in Go", what, v, l.Go)
			}
		case i-len(ls) < len(names):
			n := names[i-len(ls)]
			if v != enums[n] {
				t.Errorf("%s = %d in C, %d in Go", n, v, enums[n])
			}
		}
		i++
	}
	if i != len(ls)+len(names) {
		t.Fatalf("C program printed %d values, want %d", i, len(ls)+len(names))
	}
	t.Logf("%d offsets and sizes, %d enum values match verbs.h", len(ls), len(names))
}
