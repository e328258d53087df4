package main

import (
	"fmt"
	"io"

	"github.com/rdma-go/rdma-go/verbs"
)

// This file holds the output of ibv_devinfo, written from attribute values
// only, so that it can be checked byte for byte against rdma-core 44.0's
// libibverbs/examples/devinfo.c. Every format string below is the C one.

// hca is everything ibv_devinfo prints about one device.
type hca struct {
	Name      string
	Transport verbs.TransportType
	Attr      verbs.DeviceAttr
	Ext       extAttr
	Ports     []port
}

// port is one port of an hca with its whole GID table (printed with -v).
type port struct {
	Num  uint32
	Attr verbs.PortAttr
	GIDs []gidEntry // index i of the table at position i
}

// gidEntry is one GID table entry and its type.
type gidEntry struct {
	GID  verbs.GID
	Type verbs.GIDType
}

// extAttr holds the fields of struct ibv_device_attr_ex beyond
// ibv_device_attr that ibv_devinfo -v prints. The verbs API has no
// ibv_query_device_ex: the soft device, like rxe, supports none of these
// features, and rxe reports them all as zero, so the tool prints the zero
// value (ODP "NO SUPPORT", "completion_timestamp_mask not supported", "core
// clock not supported", max_tso 0, ...). DeviceCapFlagsEx is not here: it
// is verbs.DeviceAttr.DeviceCapFlags, which already carries all 64 bits.
type extAttr struct {
	ODPGeneralCaps          uint64
	ODPRCCaps               uint32
	ODPUCCaps               uint32
	ODPUDCaps               uint32
	ODPXRCCaps              uint32
	CompletionTimestampMask uint64
	HCACoreClock            uint64
	RawPacketCaps           uint32
	TSOMaxTSO               uint32
	TSOSupportedQPTs        uint32
	RSSMaxRWQIndTables      uint32
	RSSMaxRWQIndTableSize   uint32
	RSSRxHashFunction       uint32
	RSSRxHashFieldsMask     uint64
	RSSSupportedQPTs        uint32
	MaxWQTypeRQ             uint32
	PPRateLimitMin          uint32
	PPRateLimitMax          uint32
	PPSupportedQPTs         uint32
	TMMaxRndvHdrSize        uint32
	TMMaxNumTags            uint32
	TMFlags                 uint32
	TMMaxOps                uint32
	TMMaxSGE                uint32
	CQModMaxCount           uint16
	CQModMaxPeriod          uint16
	MaxDMSize               uint64
}

// writeHCA writes the whole ibv_devinfo block of one device: the device
// lines, then each port followed by an empty line; verbose adds what -v
// prints.
func writeHCA(w io.Writer, h *hca, verbose bool) {
	writeDevice(w, h.Name, h.Transport, &h.Attr, &h.Ext, verbose)
	for i := range h.Ports {
		p := &h.Ports[i]
		writePort(w, p.Num, &p.Attr, h.Transport, verbose)
		if verbose {
			for idx, g := range p.GIDs {
				writeGID(w, idx, g, p.Attr.LinkLayer)
			}
		}
		io.WriteString(w, "\n")
	}
}

// writeList writes the output of ibv_devinfo -l.
func writeList(w io.Writer, names []string) {
	s := "s"
	if len(names) == 1 {
		s = ""
	}
	fmt.Fprintf(w, "%d HCA%s found:\n", len(names), s)
	for _, n := range names {
		fmt.Fprintf(w, "\t%s\n", n)
	}
	io.WriteString(w, "\n")
}

// writeUsage writes rdma-core 44.0's usage text; prog is argv[0].
func writeUsage(w io.Writer, prog string) {
	fmt.Fprintf(w, "Usage: %s             print the ca attributes\n", prog)
	io.WriteString(w, "\n"+
		"Options:\n"+
		"  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"+
		"  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n"+
		"  -l, --list             print only the IB devices names\n"+
		"  -v, --verbose          print all the attributes of the IB device(s)\n")
}

// guidStr formats a host-order GUID as four 16-bit hex groups.
func guidStr(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48&0xffff, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// writeDevice writes the device lines of one device (everything before the
// first port). The sysfs board_id line is never printed: the soft device,
// like rxe, has no such file.
func writeDevice(w io.Writer, name string, tr verbs.TransportType, a *verbs.DeviceAttr, x *extAttr, verbose bool) {
	fmt.Fprintf(w, "hca_id:\t%s\n", name)
	fmt.Fprintf(w, "\ttransport:\t\t\t%s (%d)\n", tr, int32(tr))
	if a.FWVer != "" {
		fmt.Fprintf(w, "\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	fmt.Fprintf(w, "\tnode_guid:\t\t\t%s\n", guidStr(a.NodeGUID))
	fmt.Fprintf(w, "\tsys_image_guid:\t\t\t%s\n", guidStr(a.SysImageGUID))
	fmt.Fprintf(w, "\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	fmt.Fprintf(w, "\tvendor_part_id:\t\t\t%d\n", int32(a.VendorPartID))
	fmt.Fprintf(w, "\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	fmt.Fprintf(w, "\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if !verbose {
		return
	}
	fmt.Fprintf(w, "\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	fmt.Fprintf(w, "\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	fmt.Fprintf(w, "\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
	fmt.Fprintf(w, "\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
	fmt.Fprintf(w, "\tdevice_cap_flags:\t\t0x%08x\n", uint32(a.DeviceCapFlags))
	writeDeviceCapFlags(w, uint32(a.DeviceCapFlags))
	fmt.Fprintf(w, "\tmax_sge:\t\t\t%d\n", a.MaxSGE)
	fmt.Fprintf(w, "\tmax_sge_rd:\t\t\t%d\n", a.MaxSGERD)
	fmt.Fprintf(w, "\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
	fmt.Fprintf(w, "\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
	fmt.Fprintf(w, "\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
	fmt.Fprintf(w, "\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
	fmt.Fprintf(w, "\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRDAtom)
	fmt.Fprintf(w, "\tmax_ee_rd_atom:\t\t\t%d\n", a.MaxEERDAtom)
	fmt.Fprintf(w, "\tmax_res_rd_atom:\t\t%d\n", a.MaxResRDAtom)
	fmt.Fprintf(w, "\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRDAtom)
	fmt.Fprintf(w, "\tmax_ee_init_rd_atom:\t\t%d\n", a.MaxEEInitRDAtom)
	fmt.Fprintf(w, "\tatomic_cap:\t\t\t%s (%d)\n", atomicCapStr(a.AtomicCap), a.AtomicCap)
	fmt.Fprintf(w, "\tmax_ee:\t\t\t\t%d\n", a.MaxEE)
	fmt.Fprintf(w, "\tmax_rdd:\t\t\t%d\n", a.MaxRDD)
	fmt.Fprintf(w, "\tmax_mw:\t\t\t\t%d\n", a.MaxMW)
	fmt.Fprintf(w, "\tmax_raw_ipv6_qp:\t\t%d\n", a.MaxRawIPv6QP)
	fmt.Fprintf(w, "\tmax_raw_ethy_qp:\t\t%d\n", a.MaxRawEthyQP)
	fmt.Fprintf(w, "\tmax_mcast_grp:\t\t\t%d\n", a.MaxMcastGrp)
	fmt.Fprintf(w, "\tmax_mcast_qp_attach:\t\t%d\n", a.MaxMcastQPAttach)
	fmt.Fprintf(w, "\tmax_total_mcast_qp_attach:\t%d\n", a.MaxTotalMcastQPAttach)
	fmt.Fprintf(w, "\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
	fmt.Fprintf(w, "\tmax_fmr:\t\t\t%d\n", a.MaxFMR)
	if a.MaxFMR != 0 {
		fmt.Fprintf(w, "\tmax_map_per_fmr:\t\t%d\n", a.MaxMapPerFMR)
	}
	fmt.Fprintf(w, "\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		fmt.Fprintf(w, "\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
		fmt.Fprintf(w, "\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
	}
	fmt.Fprintf(w, "\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
	fmt.Fprintf(w, "\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	writeODPCaps(w, x)
	if x.CompletionTimestampMask != 0 {
		fmt.Fprintf(w, "\tcompletion timestamp_mask:\t\t\t0x%016x\n", x.CompletionTimestampMask)
	} else {
		io.WriteString(w, "\tcompletion_timestamp_mask not supported\n")
	}
	if x.HCACoreClock != 0 {
		fmt.Fprintf(w, "\thca_core_clock:\t\t\t%dkHZ\n", x.HCACoreClock)
	} else {
		io.WriteString(w, "\tcore clock not supported\n")
	}
	if x.RawPacketCaps != 0 {
		writeRawPacketCaps(w, x.RawPacketCaps)
	}
	fmt.Fprintf(w, "\tdevice_cap_flags_ex:\t\t0x%X\n", uint64(a.DeviceCapFlags))
	writeDeviceCapFlagsEx(w, uint64(a.DeviceCapFlags))
	writeTSOCaps(w, x)
	writeRSSCaps(w, x)
	fmt.Fprintf(w, "\tmax_wq_type_rq:\t\t\t%d\n", x.MaxWQTypeRQ)
	writePacketPacingCaps(w, x)
	writeTMCaps(w, x)
	if x.CQModMaxCount != 0 && x.CQModMaxPeriod != 0 {
		io.WriteString(w, "\n\tcq moderation caps:\n")
		fmt.Fprintf(w, "\t\tmax_cq_count:\t%d\n", x.CQModMaxCount)
		fmt.Fprintf(w, "\t\tmax_cq_period:\t%d us\n\n", x.CQModMaxPeriod)
	}
	if x.MaxDMSize != 0 {
		fmt.Fprintf(w, "\tmaximum available device memory:\t%dBytes\n\n", x.MaxDMSize)
	}
	fmt.Fprintf(w, "\tnum_comp_vectors:\t\t%d\n", a.NumCompVectors)
}

// flagLine is the indentation of every flag name line.
const flagLine = "\t\t\t\t\t"

// writeDeviceCapFlags writes one line per set bit of the 32-bit
// device_cap_flags, in rdma-core 44.0's order, then the unknown rest.
func writeDeviceCapFlags(w io.Writer, f uint32) {
	// Names only knows bits below 32 here, so every name is one of
	// devinfo.c's print_device_cap_flags list.
	names, unknown := verbs.DeviceCapFlags(f).Names()
	for _, n := range names {
		io.WriteString(w, flagLine+n+"\n")
	}
	if unknown != 0 {
		fmt.Fprintf(w, flagLine+"Unknown flags: 0x%X\n", uint64(unknown))
	}
}

// writeDeviceCapFlagsEx writes the lines for bits 32..63 of
// device_cap_flags_ex that rdma-core 44.0 knows; CC_DMA_BOUNCE (65.0) is
// still an unknown flag there.
func writeDeviceCapFlagsEx(w io.Writer, f uint64) {
	ex := f & 0xffffffff00000000
	known := uint64(verbs.DeviceCapRawScatterFCS | verbs.DeviceCapPCIWriteEndPadding)
	if ex&uint64(verbs.DeviceCapRawScatterFCS) != 0 {
		io.WriteString(w, flagLine+"RAW_SCATTER_FCS\n")
	}
	if ex&uint64(verbs.DeviceCapPCIWriteEndPadding) != 0 {
		io.WriteString(w, flagLine+"PCI_WRITE_END_PADDING\n")
	}
	if ex&^known != 0 {
		fmt.Fprintf(w, flagLine+"Unknown flags: 0x%X\n", ex&^known)
	}
}

// ODP capability bits (enum ibv_odp_general_caps, ibv_odp_transport_cap_bits).
const (
	odpSupport         = 1 << 0
	odpSupportImplicit = 1 << 1

	odpSend    = 1 << 0
	odpRecv    = 1 << 1
	odpWrite   = 1 << 2
	odpRead    = 1 << 3
	odpAtomic  = 1 << 4
	odpSRQRecv = 1 << 5
)

func writeODPCaps(w io.Writer, x *extAttr) {
	io.WriteString(w, "\tgeneral_odp_caps:\n")
	if x.ODPGeneralCaps&odpSupport != 0 {
		io.WriteString(w, flagLine+"ODP_SUPPORT\n")
	}
	if x.ODPGeneralCaps&odpSupportImplicit != 0 {
		io.WriteString(w, flagLine+"ODP_SUPPORT_IMPLICIT\n")
	}
	if u := x.ODPGeneralCaps &^ (odpSupport | odpSupportImplicit); u != 0 {
		fmt.Fprintf(w, flagLine+"Unknown flags: 0x%X\n", u)
	}
	io.WriteString(w, "\trc_odp_caps:\n")
	writeODPTransCaps(w, x.ODPRCCaps)
	io.WriteString(w, "\tuc_odp_caps:\n")
	writeODPTransCaps(w, x.ODPUCCaps)
	io.WriteString(w, "\tud_odp_caps:\n")
	writeODPTransCaps(w, x.ODPUDCaps)
	io.WriteString(w, "\txrc_odp_caps:\n")
	writeODPTransCaps(w, x.ODPXRCCaps)
}

func writeODPTransCaps(w io.Writer, t uint32) {
	if t == 0 {
		io.WriteString(w, flagLine+"NO SUPPORT\n")
		return
	}
	for _, f := range []struct {
		bit  uint32
		name string
	}{
		{odpSend, "SUPPORT_SEND"}, {odpRecv, "SUPPORT_RECV"}, {odpWrite, "SUPPORT_WRITE"},
		{odpRead, "SUPPORT_READ"}, {odpAtomic, "SUPPORT_ATOMIC"}, {odpSRQRecv, "SUPPORT_SRQ"},
	} {
		if t&f.bit != 0 {
			io.WriteString(w, flagLine+f.name+"\n")
		}
	}
	if u := t &^ (odpSend | odpRecv | odpWrite | odpRead | odpAtomic | odpSRQRecv); u != 0 {
		fmt.Fprintf(w, flagLine+"Unknown flags: 0x%X\n", u)
	}
}

func writeRawPacketCaps(w io.Writer, c uint32) {
	io.WriteString(w, "\traw packet caps:\n")
	for _, f := range []struct {
		bit  uint32
		name string
	}{
		{1 << 0, "C-VLAN stripping offload"}, {1 << 1, "Scatter FCS offload"},
		{1 << 2, "IP csum offload"}, {1 << 3, "Delay drop"},
	} {
		if c&f.bit != 0 {
			io.WriteString(w, flagLine+f.name+"\n")
		}
	}
}

// writeSupportedQPTs writes the SUPPORT_RAW_PACKET / SUPPORT_UD lines of a
// supported_qpts bit mask (bit n: QP type n).
func writeSupportedQPTs(w io.Writer, q uint32) {
	raw, ud := uint32(1)<<verbs.QPTypeRawPacket, uint32(1)<<verbs.QPTypeUD
	if q&raw != 0 {
		io.WriteString(w, flagLine+"SUPPORT_RAW_PACKET\n")
	}
	if q&ud != 0 {
		io.WriteString(w, flagLine+"SUPPORT_UD\n")
	}
	if u := q &^ (raw | ud); u != 0 {
		fmt.Fprintf(w, flagLine+"Unknown flags: 0x%X\n", u)
	}
}

func writeTSOCaps(w io.Writer, x *extAttr) {
	io.WriteString(w, "\ttso_caps:\n")
	fmt.Fprintf(w, "\t\tmax_tso:\t\t\t%d\n", int32(x.TSOMaxTSO))
	if x.TSOMaxTSO != 0 {
		io.WriteString(w, "\t\tsupported_qp:\n")
		writeSupportedQPTs(w, x.TSOSupportedQPTs)
	}
}

func writeRSSCaps(w io.Writer, x *extAttr) {
	io.WriteString(w, "\trss_caps:\n")
	fmt.Fprintf(w, "\t\tmax_rwq_indirection_tables:\t\t\t%d\n", x.RSSMaxRWQIndTables)
	fmt.Fprintf(w, "\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", x.RSSMaxRWQIndTableSize)
	fmt.Fprintf(w, "\t\trx_hash_function:\t\t\t\t0x%x\n", x.RSSRxHashFunction)
	fmt.Fprintf(w, "\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", x.RSSRxHashFieldsMask)
	if x.RSSSupportedQPTs != 0 {
		io.WriteString(w, "\t\tsupported_qp:\n")
		writeSupportedQPTs(w, x.RSSSupportedQPTs)
	}
}

func writePacketPacingCaps(w io.Writer, x *extAttr) {
	io.WriteString(w, "\tpacket_pacing_caps:\n")
	fmt.Fprintf(w, "\t\tqp_rate_limit_min:\t%dkbps\n", x.PPRateLimitMin)
	fmt.Fprintf(w, "\t\tqp_rate_limit_max:\t%dkbps\n", x.PPRateLimitMax)
	if x.PPRateLimitMax != 0 {
		io.WriteString(w, "\t\tsupported_qp:\n")
		writeSupportedQPTs(w, x.PPSupportedQPTs)
	}
}

func writeTMCaps(w io.Writer, x *extAttr) {
	if x.TMMaxNumTags == 0 {
		io.WriteString(w, "\ttag matching not supported\n")
		return
	}
	fmt.Fprintf(w, "\tmax_rndv_hdr_size:\t\t%d\n", x.TMMaxRndvHdrSize)
	fmt.Fprintf(w, "\tmax_num_tags:\t\t\t%d\n", x.TMMaxNumTags)
	fmt.Fprintf(w, "\tmax_ops:\t\t\t%d\n", x.TMMaxOps)
	fmt.Fprintf(w, "\tmax_sge:\t\t\t%d\n", x.TMMaxSGE)
	io.WriteString(w, "\tflags:\n")
	if x.TMFlags&1 != 0 { // IBV_TM_CAP_RC
		io.WriteString(w, flagLine+"IBV_TM_CAP_RC\n")
	}
}

// writePort writes the lines of one port, without its GIDs and the empty
// line that ends it. phys_state is printed for InfiniBand-transport devices
// only, which includes every RoCE device.
func writePort(w io.Writer, num uint32, a *verbs.PortAttr, tr verbs.TransportType, verbose bool) {
	fmt.Fprintf(w, "\t\tport:\t%d\n", num)
	fmt.Fprintf(w, "\t\t\tstate:\t\t\t%s (%d)\n", portStateStr(a.State), a.State)
	fmt.Fprintf(w, "\t\t\tmax_mtu:\t\t%s (%d)\n", mtuStr(a.MaxMTU), a.MaxMTU)
	fmt.Fprintf(w, "\t\t\tactive_mtu:\t\t%s (%d)\n", mtuStr(a.ActiveMTU), a.ActiveMTU)
	fmt.Fprintf(w, "\t\t\tsm_lid:\t\t\t%d\n", a.SMLID)
	fmt.Fprintf(w, "\t\t\tport_lid:\t\t%d\n", a.LID)
	fmt.Fprintf(w, "\t\t\tport_lmc:\t\t0x%02x\n", a.LMC)
	fmt.Fprintf(w, "\t\t\tlink_layer:\t\t%s\n", a.LinkLayer)
	if !verbose {
		return
	}
	fmt.Fprintf(w, "\t\t\tmax_msg_sz:\t\t0x%x\n", a.MaxMsgSz)
	fmt.Fprintf(w, "\t\t\tport_cap_flags:\t\t0x%08x\n", a.PortCapFlags)
	fmt.Fprintf(w, "\t\t\tport_cap_flags2:\t0x%04x\n", a.PortCapFlags2)
	fmt.Fprintf(w, "\t\t\tmax_vl_num:\t\t%s (%d)\n", vlStr(a.MaxVLNum), a.MaxVLNum)
	fmt.Fprintf(w, "\t\t\tbad_pkey_cntr:\t\t0x%x\n", a.BadPKeyCntr)
	fmt.Fprintf(w, "\t\t\tqkey_viol_cntr:\t\t0x%x\n", a.QKeyViolCntr)
	fmt.Fprintf(w, "\t\t\tsm_sl:\t\t\t%d\n", a.SMSL)
	fmt.Fprintf(w, "\t\t\tpkey_tbl_len:\t\t%d\n", a.PKeyTblLen)
	fmt.Fprintf(w, "\t\t\tgid_tbl_len:\t\t%d\n", a.GIDTblLen)
	fmt.Fprintf(w, "\t\t\tsubnet_timeout:\t\t%d\n", a.SubnetTimeout)
	fmt.Fprintf(w, "\t\t\tinit_type_reply:\t%d\n", a.InitTypeReply)
	fmt.Fprintf(w, "\t\t\tactive_width:\t\t%sX (%d)\n", widthStr(a.ActiveWidth), a.ActiveWidth)
	fmt.Fprintf(w, "\t\t\tactive_speed:\t\t%s (%d)\n", speedStr(a.ActiveSpeed), a.ActiveSpeed)
	if tr == verbs.TransportIB {
		fmt.Fprintf(w, "\t\t\tphys_state:\t\t%s (%d)\n", physStateStr(a.PhysState), a.PhysState)
	}
}

// writeGID writes the line of GID table entry idx, or nothing when the
// entry counts as empty (its interface ID is zero) or its type is neither
// IB/RoCE v1 nor RoCE v2. The type suffix appears on Ethernet ports only.
func writeGID(w io.Writer, idx int, e gidEntry, ll verbs.LinkLayer) {
	if e.GID.InterfaceIDZero() {
		return
	}
	var suffix string
	switch e.Type {
	case verbs.GIDTypeIB, verbs.GIDTypeRoCEv1: // sysfs "IB/RoCE v1"
		if ll == verbs.LinkLayerEthernet {
			suffix = ", RoCE v1"
		}
		g := e.GID
		fmt.Fprintf(w, "\t\t\tGID[%3d]:\t\t%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x%s\n",
			idx, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
			g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15], suffix)
	case verbs.GIDTypeRoCEv2:
		if ll == verbs.LinkLayerEthernet {
			suffix = ", RoCE v2"
		}
		// GID.String is inet_ntop(AF_INET6).
		fmt.Fprintf(w, "\t\t\tGID[%3d]:\t\t%s%s\n", idx, e.GID, suffix)
	}
}

// The value names of devinfo.c, which differ from the verbs String methods
// for values outside the ranges the tool knows.

func portStateStr(s verbs.PortState) string {
	switch s {
	case verbs.PortDown:
		return "PORT_DOWN"
	case verbs.PortInit:
		return "PORT_INIT"
	case verbs.PortArmed:
		return "PORT_ARMED"
	case verbs.PortActive:
		return "PORT_ACTIVE"
	}
	return "invalid state"
}

func physStateStr(s uint8) string {
	switch s {
	case 1:
		return "SLEEP"
	case 2:
		return "POLLING"
	case 3:
		return "DISABLED"
	case 4:
		return "PORT_CONFIGURATION TRAINNING"
	case 5:
		return "LINK_UP"
	case 6:
		return "LINK_ERROR_RECOVERY"
	case 7:
		return "PHY TEST"
	}
	return "invalid physical state"
}

func atomicCapStr(a verbs.AtomicCap) string {
	switch a {
	case verbs.AtomicNone, verbs.AtomicHCA, verbs.AtomicGlob:
		return a.String()
	}
	return "invalid atomic capability"
}

func mtuStr(m verbs.MTU) string {
	if m.Valid() {
		return m.String()
	}
	return "invalid MTU"
}

func widthStr(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedStr(v uint8) string {
	switch v {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	}
	return "invalid speed"
}

func vlStr(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}
