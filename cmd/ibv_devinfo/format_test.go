package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/verbs"
)

// sampleHCA returns the attribute values of the verbose sample of the tools
// spec (a kernel rxe on a 10 GbE netdev, MAC 52:54:00:12:34:56, address
// 192.0.2.1).
func sampleHCA(t *testing.T) *hca {
	t.Helper()
	gids := make([]gidEntry, 1024)
	for i := range gids {
		gids[i].Type = verbs.GIDTypeRoCEv2
	}
	var err error
	if gids[0].GID, err = verbs.ParseGID("fe80::5054:ff:fe12:3456"); err != nil {
		t.Fatal(err)
	}
	if gids[1].GID, err = verbs.ParseGID("::ffff:192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	return &hca{
		Name:      "rxe0",
		Transport: verbs.TransportIB,
		Attr: verbs.DeviceAttr{
			NodeGUID:              0x505400fffe123456,
			SysImageGUID:          0x505400fffe123456,
			MaxMRSize:             0xffffffffffffffff,
			PageSizeCap:           0xfffff000,
			VendorID:              0xffffff,
			MaxQP:                 1048560,
			MaxQPWR:               1048576,
			DeviceCapFlags:        0x01223c76,
			MaxSGE:                32,
			MaxSGERD:              32,
			MaxCQ:                 1048576,
			MaxCQE:                32767,
			MaxMR:                 524287,
			MaxPD:                 1048576,
			MaxQPRDAtom:           128,
			MaxResRDAtom:          258048,
			MaxQPInitRDAtom:       128,
			AtomicCap:             verbs.AtomicHCA,
			MaxMW:                 524287,
			MaxMcastGrp:           8192,
			MaxMcastQPAttach:      56,
			MaxTotalMcastQPAttach: 458752,
			MaxAH:                 32767,
			MaxSRQ:                917503,
			MaxSRQWR:              1048576,
			MaxSRQSGE:             27,
			MaxPKeys:              64,
			LocalCAAckDelay:       15,
			PhysPortCnt:           1,
			NumCompVectors:        2,
		},
		Ports: []port{{
			Num: 1,
			Attr: verbs.PortAttr{
				State:        verbs.PortActive,
				MaxMTU:       verbs.MTU4096,
				ActiveMTU:    verbs.MTU1024,
				GIDTblLen:    1024,
				PortCapFlags: 0x00010000,
				MaxMsgSz:     0x80000000,
				PKeyTblLen:   1,
				MaxVLNum:     1,
				ActiveWidth:  1,
				ActiveSpeed:  8,
				PhysState:    5,
				LinkLayer:    verbs.LinkLayerEthernet,
			},
			GIDs: gids,
		}},
	}
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// diff reports the first differing line of got and want.
func diff(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.SplitAfter(got, "\n"), strings.SplitAfter(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("line %d: got %q, want %q", i+1, gl, wl)
		}
	}
	t.Fatalf("got %q, want %q", got, want)
}

func TestVerboseGolden(t *testing.T) {
	var b bytes.Buffer
	writeHCA(&b, sampleHCA(t), true)
	diff(t, b.String(), golden(t, "verbose.golden"))
}

func TestPlainGolden(t *testing.T) {
	var b bytes.Buffer
	writeHCA(&b, sampleHCA(t), false)
	diff(t, b.String(), golden(t, "plain.golden"))
}

func TestListGolden(t *testing.T) {
	var b bytes.Buffer
	writeList(&b, []string{"rxe0"})
	diff(t, b.String(), golden(t, "list.golden"))
	b.Reset()
	writeList(&b, nil)
	diff(t, b.String(), "0 HCAs found:\n\n")
	b.Reset()
	writeList(&b, []string{"rgo0", "rgo1"})
	diff(t, b.String(), "2 HCAs found:\n\trgo0\n\trgo1\n\n")
}

func TestUsage(t *testing.T) {
	var b bytes.Buffer
	writeUsage(&b, "./ibv_devinfo")
	diff(t, b.String(), "Usage: ./ibv_devinfo             print the ca attributes\n"+
		"\n"+
		"Options:\n"+
		"  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"+
		"  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n"+
		"  -l, --list             print only the IB devices names\n"+
		"  -v, --verbose          print all the attributes of the IB device(s)\n")
}

// TestDeviceBranches covers the optional and unusual device lines: a
// firmware string, flags unknown to rdma-core 44.0, FMRs, no SRQ, invalid
// enum values and every extended attribute set.
func TestDeviceBranches(t *testing.T) {
	a := verbs.DeviceAttr{
		FWVer:          "1.2.3",
		NodeGUID:       0x0123456789abcdef,
		VendorID:       0x15b3,
		VendorPartID:   0xffffffff,
		HWVer:          0xab,
		DeviceCapFlags: 1 | 1<<15 | 1<<31 | verbs.DeviceCapRawScatterFCS | verbs.DeviceCapPCIWriteEndPadding | verbs.DeviceCapCCDMABounce,
		AtomicCap:      7,
		MaxFMR:         3,
		MaxMapPerFMR:   9,
		PhysPortCnt:    2,
	}
	x := extAttr{
		ODPGeneralCaps: 1 | 2 | 8, ODPRCCaps: 0x3f | 0x100, ODPUDCaps: 1 << 1,
		CompletionTimestampMask: 0xffff, HCACoreClock: 156250, RawPacketCaps: 0xf,
		TSOMaxTSO: 262144, TSOSupportedQPTs: 1<<8 | 1<<4 | 1,
		RSSMaxRWQIndTables: 4, RSSMaxRWQIndTableSize: 8, RSSRxHashFunction: 1,
		RSSRxHashFieldsMask: 0xff00000000, RSSSupportedQPTs: 1 << 8,
		MaxWQTypeRQ: 5, PPRateLimitMin: 1, PPRateLimitMax: 100, PPSupportedQPTs: 1 << 4,
		TMMaxRndvHdrSize: 64, TMMaxNumTags: 32, TMFlags: 1, TMMaxOps: 16, TMMaxSGE: 1,
		CQModMaxCount: 65535, CQModMaxPeriod: 4095, MaxDMSize: 131072,
	}
	var b bytes.Buffer
	writeDevice(&b, "mlx5_0", verbs.TransportIWARP, &a, &x, true)
	want := "hca_id:\tmlx5_0\n" +
		"\ttransport:\t\t\tiWARP (1)\n" +
		"\tfw_ver:\t\t\t\t1.2.3\n" +
		"\tnode_guid:\t\t\t0123:4567:89ab:cdef\n" +
		"\tsys_image_guid:\t\t\t0000:0000:0000:0000\n" +
		"\tvendor_id:\t\t\t0x15b3\n" +
		"\tvendor_part_id:\t\t\t-1\n" +
		"\thw_ver:\t\t\t\t0xAB\n" +
		"\tphys_port_cnt:\t\t\t2\n" +
		"\tmax_mr_size:\t\t\t0x0\n" +
		"\tpage_size_cap:\t\t\t0x0\n" +
		"\tmax_qp:\t\t\t\t0\n" +
		"\tmax_qp_wr:\t\t\t0\n" +
		"\tdevice_cap_flags:\t\t0x80008001\n" +
		"\t\t\t\t\tRESIZE_MAX_WR\n" +
		"\t\t\t\t\tUnknown flags: 0x80008000\n" +
		"\tmax_sge:\t\t\t0\n" +
		"\tmax_sge_rd:\t\t\t0\n" +
		"\tmax_cq:\t\t\t\t0\n" +
		"\tmax_cqe:\t\t\t0\n" +
		"\tmax_mr:\t\t\t\t0\n" +
		"\tmax_pd:\t\t\t\t0\n" +
		"\tmax_qp_rd_atom:\t\t\t0\n" +
		"\tmax_ee_rd_atom:\t\t\t0\n" +
		"\tmax_res_rd_atom:\t\t0\n" +
		"\tmax_qp_init_rd_atom:\t\t0\n" +
		"\tmax_ee_init_rd_atom:\t\t0\n" +
		"\tatomic_cap:\t\t\tinvalid atomic capability (7)\n" +
		"\tmax_ee:\t\t\t\t0\n" +
		"\tmax_rdd:\t\t\t0\n" +
		"\tmax_mw:\t\t\t\t0\n" +
		"\tmax_raw_ipv6_qp:\t\t0\n" +
		"\tmax_raw_ethy_qp:\t\t0\n" +
		"\tmax_mcast_grp:\t\t\t0\n" +
		"\tmax_mcast_qp_attach:\t\t0\n" +
		"\tmax_total_mcast_qp_attach:\t0\n" +
		"\tmax_ah:\t\t\t\t0\n" +
		"\tmax_fmr:\t\t\t3\n" +
		"\tmax_map_per_fmr:\t\t9\n" +
		"\tmax_srq:\t\t\t0\n" +
		"\tmax_pkeys:\t\t\t0\n" +
		"\tlocal_ca_ack_delay:\t\t0\n" +
		"\tgeneral_odp_caps:\n" +
		"\t\t\t\t\tODP_SUPPORT\n" +
		"\t\t\t\t\tODP_SUPPORT_IMPLICIT\n" +
		"\t\t\t\t\tUnknown flags: 0x8\n" +
		"\trc_odp_caps:\n" +
		"\t\t\t\t\tSUPPORT_SEND\n" +
		"\t\t\t\t\tSUPPORT_RECV\n" +
		"\t\t\t\t\tSUPPORT_WRITE\n" +
		"\t\t\t\t\tSUPPORT_READ\n" +
		"\t\t\t\t\tSUPPORT_ATOMIC\n" +
		"\t\t\t\t\tSUPPORT_SRQ\n" +
		"\t\t\t\t\tUnknown flags: 0x100\n" +
		"\tuc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tud_odp_caps:\n" +
		"\t\t\t\t\tSUPPORT_RECV\n" +
		"\txrc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tcompletion timestamp_mask:\t\t\t0x000000000000ffff\n" +
		"\thca_core_clock:\t\t\t156250kHZ\n" +
		"\traw packet caps:\n" +
		"\t\t\t\t\tC-VLAN stripping offload\n" +
		"\t\t\t\t\tScatter FCS offload\n" +
		"\t\t\t\t\tIP csum offload\n" +
		"\t\t\t\t\tDelay drop\n" +
		"\tdevice_cap_flags_ex:\t\t0x21480008001\n" +
		"\t\t\t\t\tRAW_SCATTER_FCS\n" +
		"\t\t\t\t\tPCI_WRITE_END_PADDING\n" +
		"\t\t\t\t\tUnknown flags: 0x20000000000\n" +
		"\ttso_caps:\n" +
		"\t\tmax_tso:\t\t\t262144\n" +
		"\t\tsupported_qp:\n" +
		"\t\t\t\t\tSUPPORT_RAW_PACKET\n" +
		"\t\t\t\t\tSUPPORT_UD\n" +
		"\t\t\t\t\tUnknown flags: 0x1\n" +
		"\trss_caps:\n" +
		"\t\tmax_rwq_indirection_tables:\t\t\t4\n" +
		"\t\tmax_rwq_indirection_table_size:\t\t\t8\n" +
		"\t\trx_hash_function:\t\t\t\t0x1\n" +
		"\t\trx_hash_fields_mask:\t\t\t\t0xFF00000000\n" +
		"\t\tsupported_qp:\n" +
		"\t\t\t\t\tSUPPORT_RAW_PACKET\n" +
		"\tmax_wq_type_rq:\t\t\t5\n" +
		"\tpacket_pacing_caps:\n" +
		"\t\tqp_rate_limit_min:\t1kbps\n" +
		"\t\tqp_rate_limit_max:\t100kbps\n" +
		"\t\tsupported_qp:\n" +
		"\t\t\t\t\tSUPPORT_UD\n" +
		"\tmax_rndv_hdr_size:\t\t64\n" +
		"\tmax_num_tags:\t\t\t32\n" +
		"\tmax_ops:\t\t\t16\n" +
		"\tmax_sge:\t\t\t1\n" +
		"\tflags:\n" +
		"\t\t\t\t\tIBV_TM_CAP_RC\n" +
		"\n\tcq moderation caps:\n" +
		"\t\tmax_cq_count:\t65535\n" +
		"\t\tmax_cq_period:\t4095 us\n\n" +
		"\tmaximum available device memory:\t131072Bytes\n\n" +
		"\tnum_comp_vectors:\t\t0\n"
	diff(t, b.String(), want)
}

// TestPortBranches covers invalid enum values, other link layers and the
// GID formats.
func TestPortBranches(t *testing.T) {
	a := verbs.PortAttr{
		State: verbs.PortActiveDefer, MaxMTU: 0, ActiveMTU: 9, LID: 7, SMLID: 1, LMC: 0x1f,
		LinkLayer: 9, MaxVLNum: 6, ActiveWidth: 3, ActiveSpeed: 3, PhysState: 0,
		PortCapFlags2: 0x12, BadPKeyCntr: 0x10, QKeyViolCntr: 0xa, SMSL: 2, SubnetTimeout: 18, InitTypeReply: 1,
	}
	var b bytes.Buffer
	writePort(&b, 2, &a, verbs.TransportIB, true)
	want := "\t\tport:\t2\n" +
		"\t\t\tstate:\t\t\tinvalid state (5)\n" +
		"\t\t\tmax_mtu:\t\tinvalid MTU (0)\n" +
		"\t\t\tactive_mtu:\t\tinvalid MTU (9)\n" +
		"\t\t\tsm_lid:\t\t\t1\n" +
		"\t\t\tport_lid:\t\t7\n" +
		"\t\t\tport_lmc:\t\t0x1f\n" +
		"\t\t\tlink_layer:\t\tUnknown\n" +
		"\t\t\tmax_msg_sz:\t\t0x0\n" +
		"\t\t\tport_cap_flags:\t\t0x00000000\n" +
		"\t\t\tport_cap_flags2:\t0x0012\n" +
		"\t\t\tmax_vl_num:\t\tinvalid value (6)\n" +
		"\t\t\tbad_pkey_cntr:\t\t0x10\n" +
		"\t\t\tqkey_viol_cntr:\t\t0xa\n" +
		"\t\t\tsm_sl:\t\t\t2\n" +
		"\t\t\tpkey_tbl_len:\t\t0\n" +
		"\t\t\tgid_tbl_len:\t\t0\n" +
		"\t\t\tsubnet_timeout:\t\t18\n" +
		"\t\t\tinit_type_reply:\t1\n" +
		"\t\t\tactive_width:\t\tinvalid widthX (3)\n" +
		"\t\t\tactive_speed:\t\tinvalid speed (3)\n" +
		"\t\t\tphys_state:\t\tinvalid physical state (0)\n"
	diff(t, b.String(), want)

	// No phys_state line for other transports.
	b.Reset()
	writePort(&b, 1, &a, verbs.TransportIWARP, true)
	if strings.Contains(b.String(), "phys_state") {
		t.Error("phys_state printed for an iWARP device")
	}

	// Value names.
	for _, c := range []struct{ got, want string }{
		{portStateStr(verbs.PortDown), "PORT_DOWN"},
		{portStateStr(verbs.PortInit), "PORT_INIT"},
		{portStateStr(verbs.PortArmed), "PORT_ARMED"},
		{portStateStr(verbs.PortNOP), "invalid state"},
		{widthStr(2) + widthStr(4) + widthStr(8) + widthStr(16), "48122"},
		{speedStr(1), "2.5 Gbps"}, {speedStr(2), "5.0 Gbps"}, {speedStr(4), "10.0 Gbps"},
		{speedStr(16), "14.0 Gbps"}, {speedStr(32), "25.0 Gbps"}, {speedStr(64), "50.0 Gbps"},
		{speedStr(128), "100.0 Gbps"},
		{vlStr(2) + vlStr(3) + vlStr(4) + vlStr(5), "24815"},
		{physStateStr(1) + "," + physStateStr(2) + "," + physStateStr(3) + "," + physStateStr(4) + "," +
			physStateStr(6) + "," + physStateStr(7), "SLEEP,POLLING,DISABLED,PORT_CONFIGURATION TRAINNING,LINK_ERROR_RECOVERY,PHY TEST"},
		{atomicCapStr(verbs.AtomicNone) + atomicCapStr(verbs.AtomicGlob), "ATOMIC_NONEATOMIC_GLOB"},
		{mtuStr(verbs.MTU256) + mtuStr(verbs.MTU512) + mtuStr(verbs.MTU2048), "2565122048"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestGIDLines(t *testing.T) {
	mustGID := func(s string) verbs.GID {
		g, err := verbs.ParseGID(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	ll := mustGID("fe80::5054:ff:fe12:3456")
	for _, c := range []struct {
		idx  int
		e    gidEntry
		ll   verbs.LinkLayer
		want string
	}{
		{0, gidEntry{ll, verbs.GIDTypeRoCEv2}, verbs.LinkLayerEthernet, "\t\t\tGID[  0]:\t\tfe80::5054:ff:fe12:3456, RoCE v2\n"},
		{12, gidEntry{mustGID("::ffff:127.0.0.1"), verbs.GIDTypeRoCEv2}, verbs.LinkLayerEthernet, "\t\t\tGID[ 12]:\t\t::ffff:127.0.0.1, RoCE v2\n"},
		{1000, gidEntry{mustGID("2001:db8::1"), verbs.GIDTypeRoCEv2}, verbs.LinkLayerInfiniBand, "\t\t\tGID[1000]:\t\t2001:db8::1\n"},
		{1, gidEntry{ll, verbs.GIDTypeRoCEv1}, verbs.LinkLayerEthernet, "\t\t\tGID[  1]:\t\tfe80:0000:0000:0000:5054:00ff:fe12:3456, RoCE v1\n"},
		{1, gidEntry{ll, verbs.GIDTypeIB}, verbs.LinkLayerInfiniBand, "\t\t\tGID[  1]:\t\tfe80:0000:0000:0000:5054:00ff:fe12:3456\n"},
		{2, gidEntry{ll, 7}, verbs.LinkLayerEthernet, ""}, // invalid type: nothing
		{3, gidEntry{mustGID("fe80::"), verbs.GIDTypeRoCEv2}, verbs.LinkLayerEthernet, ""},
		{4, gidEntry{}, verbs.LinkLayerEthernet, ""},
	} {
		var b bytes.Buffer
		writeGID(&b, c.idx, c.e, c.ll)
		if got := b.String(); got != c.want {
			t.Errorf("GID %d %s: got %q, want %q", c.idx, c.e.GID, got, c.want)
		}
	}
}
