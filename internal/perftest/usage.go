package perftest

import (
	"fmt"
	"io"
)

// Usage prints perftest 6.06's help for test t, as Debian 12's build prints
// it (with DCS, AES-XTS, ODP and PCIe relaxed ordering compiled in), then
// the options rdma-go adds.
func Usage(w io.Writer, prog string, t Test) {
	verb, tst := t.Verb, t.Kind
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("Usage:\n")
	p("  %s            start a server and wait for connection\n", prog)
	p("  %s <host>     connect to server at <host>\n", prog)
	p("\n")
	p("Options:\n")
	if verb != Atomic {
		p("  -a, --all ")
		p(" Run sizes from 2 till 2^23\n")
	}
	if verb == Atomic {
		p("  -A, --atomic_type=<type> ")
		p(" type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)\n")
	}
	if tst == BW {
		p("  -b, --bidirectional ")
		p(" Measure bidirectional bandwidth (default unidirectional)\n")
	}
	switch verb {
	case Send:
		p("  -c, --connection=<RC/XRC/UC/UD/DC/SRD> ")
		p(" Connection type RC/XRC/UC/UD/DC/SRD (default RC)\n")
	case Write:
		p("  -c, --connection=<RC/XRC/UC/DC> ")
		p(" Connection type RC/XRC/UC/DC (default RC)\n")
	default:
		p("  -c, --connection=<RC/XRC/DC> ")
		p(" Connection type RC/XRC/DC (default RC)\n")
	}
	p("      --log_dci_streams=<log_num_dci_stream_channels> (default 0) ")
	p(" Run DC initiator as DCS instead of DCI with <log_num dci_stream_channels>\n")
	p("      --log_active_dci_streams=<log_num_active_dci_stream_channels> (default log_num_dci_stream_channels)\n")
	p("\t  --aes_xts Runs traffic with AES_XTS feature (encryption)\n")
	p("\t  --encrypt_on_tx Runs traffic with encryption on tx (default decryption on tx)\n")
	p("\t  --sig_before Puts signature on data before encrypting it (default after)\n")
	p("      --aes_block_size=<512,520,4048,4096,4160> (default 512)\n")
	p("\t  --data_enc_keys_number=<number of data encryption keys> (default 1)\n")
	p("\t  --kek_path path to the key encryption key file\n")
	p("\t  --credentials_path path to the credentials file\n")
	p("\t  --data_enc_key_app_path path to the data encryption key app\n")
	if tst == LAT {
		p("  -C, --report-cycles ")
		p(" report times in cpu cycle units (default microseconds)\n")
	}
	p("  -d, --ib-dev=<dev> ")
	p(" Use IB device <dev> (default first device found)\n")
	p("  -D, --duration ")
	p(" Run test for a customized period of seconds.\n")
	if verb != Write {
		p("  -e, --events ")
		p(" Sleep on CQ events (default poll)\n")
		p("  -X, --vector=<completion vector> ")
		p(" Set <completion vector> used for events\n")
	}
	p("  -f, --margin ")
	p(" measure results within margins. (default=2sec)\n")
	p("  -F, --CPU-freq ")
	p(" Do not show a warning even if cpufreq_ondemand module is loaded, and cpu-freq is not on max.\n")
	if verb == Send {
		p("  -g, --mcg ")
		p(" Send messages to multicast group with 1 QP attached to it.\n")
	}
	p("  -h, --help ")
	p(" Show this help screen.\n")
	if tst == LAT {
		p("  -H, --report-histogram ")
		p(" Print out all results (default print summary only)\n")
	}
	p("  -i, --ib-port=<port> ")
	p(" Use port <port> of IB device (default %d)\n", 1)
	if verb != Read && verb != Atomic {
		p("  -I, --inline_size=<size> ")
		p(" Max size of message to be sent in inline\n")
	}
	if tst == BW {
		p("  -l, --post_list=<list size>\n")
		p(" Post list of send WQEs of <list size> size (instead of single post)\n")
		p("      --recv_post_list=<list size>")
		p(" Post list of receive WQEs of <list size> size (instead of single post)\n")
	}
	p("  -L, --hop_limit=<hop_limit> ")
	p(" Set hop limit value (ttl for IPv4 RawEth QP). Values 0-255 (default %d)\n", DefHopLimit)
	p("  -m, --mtu=<mtu> ")
	p(" MTU size : 256 - 4096 (default port mtu)\n")
	if verb == Send {
		p("  -M, --MGID=<multicast_gid> ")
		p(" In multicast, uses <multicast_gid> as the group MGID.\n")
	}
	p("  -n, --iters=<iters> ")
	defIters := DefIters
	if verb == Write && tst == BW {
		defIters = DefItersWriteB
	}
	p(" Number of exchanges (at least %d, default %d)\n", minIter, defIters)
	if tst == BW {
		p("  -N, --noPeak")
		p(" Cancel peak-bw calculation (default with peak up to iters=20000)\n")
	}
	if verb == Read || verb == Atomic {
		p("  -o, --outs=<num> ")
		p(" num of outstanding read/atom(default max of device)\n")
	}
	if tst == BW {
		p("  -O, --dualport ")
		p(" Run test in dual-port mode.\n")
	}
	p("  -p, --port=<port> ")
	p(" Listen on/connect to port <port> (default %d)\n", DefPort)
	if tst == BW {
		p("  -q, --qp=<num of qp's>  Num of qp's(default %d)\n", 1)
		p("  -Q, --cq-mod ")
		p(" Generate Cqe only after <--cq-mod> completion\n")
	}
	if verb == Send {
		p("  -r, --rx-depth=<dep> ")
		p(" Rx queue size (default %d).", DefRxSend)
		p(" If using srq, rx-depth controls max-wr size of the srq\n")
	}
	p("  -R, --rdma_cm ")
	p(" Connect QPs with rdma_cm and run test on those QPs\n")
	if verb != Atomic {
		p("  -s, --size=<size> ")
		size := DefSizeBW
		if tst == LAT {
			size = DefSizeLat
		}
		p(" Size of message to exchange (default %d)\n", size)
	}
	p("  -S, --sl=<sl> ")
	p(" SL (default %d)\n", 0)
	if tst == BW {
		p("  -t, --tx-depth=<dep> ")
		p(" Size of tx queue (default %d)\n", DefTxBW)
	}
	p("  -T, --tos=<tos value> ")
	p(" Set <tos_value> to RDMA-CM QPs. available only with -R flag. values 0-256 (default off)\n")
	p("  -u, --qp-timeout=<timeout> ")
	p(" QP timeout, timeout value is 4 usec * 2 ^(timeout), default %d\n", DefQPTimeout)
	if tst == LAT {
		p("  -U, --report-unsorted ")
		p(" (implies -H) print out unsorted results (default sorted)\n")
	}
	p("  -V, --version ")
	p(" Display version number\n")
	if tst == BW {
		p("  -w, --limit_bw=<value> ")
		p(" Set verifier limit for bandwidth\n")
	}
	p("  -W, --report-counters=<list of counter names> ")
	p(" Report performance counter change (example: \"counters/port_xmit_data,hw_counters/out_of_buffer\")\n")
	p("  -x, --gid-index=<index> ")
	p(" Test uses GID with GID index (Default : IB - no gid . ETH - 0)\n")
	if tst == BW {
		p("  -y, --limit_msgrate=<value> ")
		p(" Set verifier limit for Msg Rate\n")
	}
	p("  -z, --com_rdma_cm ")
	p(" Communicate with rdma_cm module to exchange data - use regular QPs\n")
	p("\n")
	p("      --out_json ")
	p(" Save the report in a json file\n")
	p("      --out_json_file=<file> ")
	p(" Name of the report json file. (Default: %s in the working directory) \n", "perftest_out.json")
	p("      --cpu_util ")
	p(" Show CPU Utilization in report, valid only in Duration mode \n")
	p("      --dlid ")
	p(" Set a Destination LID instead of getting it from the other side.\n")
	p("      --dont_xchg_versions ")
	p(" Do not exchange versions and MTU with other side \n")
	p("      --force-link=<value> ")
	p(" Force the link(s) to a specific type: IB or Ethernet.\n")
	if verb != Write {
		p("      --inline_recv=<size> ")
		p(" Max size of message to be sent in inline receive\n")
	}
	if verb == Send {
		p("      --use-srq ")
		p(" Use a Shared Receive Queue. --rx-depth controls max-wr size of the SRQ \n")
	}
	p("      --ipv6 ")
	p(" Use IPv6 GID. Default is IPv4\n")
	p("      --source_ip ")
	p(" Source IP of the interface used for connection establishment. By default taken from routing table.\n")
	if tst == LAT {
		p("      --latency_gap=<delay_time> ")
		p(" delay time between each post send\n")
	}
	p("      --mmap=file ")
	p(" Use an mmap'd file as the buffer for testing P2P transfers.\n")
	p("      --mmap-offset=<offset> ")
	p(" Use an mmap'd file as the buffer for testing P2P transfers.\n")
	if tst == BW {
		p("      --mr_per_qp ")
		p(" Create memory region for each qp.\n")
	}
	p("      --odp ")
	p(" Use On Demand Paging instead of Memory Registration.\n")
	p("      --output=<units>")
	p(" Set verbosity output level: bandwidth , message_rate, latency \n")
	p(" Latency measurement is Average calculation \n")
	p("      --use_old_post_send")
	p(" Use old post send flow (ibv_post_send).\n")
	p("      --perform_warm_up")
	p(" Perform some iterations before start measuring in order to warming-up memory cache, valid in Atomic, Read and Write BW tests\n")
	p("      --pkey_index=<pkey index> PKey index to use for QP\n")
	if tst == BW {
		p("      --report-both ")
		p(" Report RX & TX results separately on Bidirectional BW tests\n")
		p("      --report_gbits ")
		p(" Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)\n")
		p("        Note: MiB=2^20 byte, while Gb=10^9 bits. Use these formulas for conversion:\n")
		p("        Factor=10^9/(2^20*8)=119.2; MiB=Gb_result * factor; Gb=MiB_result / factor\n")
		p("      --report-per-port ")
		p(" Report BW data on both ports when running Dualport and Duration mode\n")
		p("      --reversed ")
		p(" Reverse traffic direction - Server send to client\n")
		p("      --run_infinitely ")
		p(" Run test forever, print results every <duration> seconds\n")
	}
	p("      --retry_count=<value> ")
	p(" Set retry count value in rdma_cm mode\n")
	p("      --tclass=<value> ")
	p(" Set the Traffic Class in GRH (if GRH is in use)\n")
	p("      --use_hugepages ")
	p(" Use Hugepages instead of contig, memalign allocations.\n")
	if tst == BW {
		p("      --wait_destroy=<seconds> ")
		p(" Wait <seconds> before destroying allocated resources (QP/CQ/PD/MR..)\n")
		p("      --disable_pcie_relaxed")
		p(" Disable PCIe relaxed ordering\n")
		p("\n Rate Limiter:\n")
		p("      --burst_size=<size>")
		p(" Set the amount of messages to send in a burst when using rate limiter\n")
		p("      --typical_pkt_size=<bytes>")
		p(" Set the size of packet to send in a burst. Only supports PP rate limiter\n")
		p("      --rate_limit=<rate>")
		p(" Set the maximum rate of sent packages. default unit is [Gbps]. use --rate_units to change that.\n")
		p("      --rate_units=<units>")
		p(" [Mgp] Set the units for rate limit to MiBps (M), Gbps (g) or pps (p). default is Gbps (g).\n")
		p("        Note (1): pps not supported with HW limit.\n")
		p("        Note (2): When using PP rate_units is forced to Kbps.\n")
		p("      --rate_limit_type=<type>")
		p(" [HW/SW/PP] Limit the QP's by HW, PP or by SW. Disabled by default. When rate_limit is not specified HW limit is Default.\n")
		p("        Note: in Latency under load test SW rate limit is forced\n")
	}
	p("\n")
	p(" rdma-go additions:\n")
	p("      --json  Print one JSON object (every figure and the environment) instead of the text report\n")
	if verb != Atomic {
		p("      --png=<file>  With -a, write a PNG chart of the results against the message size\n")
	}
}
