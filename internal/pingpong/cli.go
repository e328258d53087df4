package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/rdma-go/rdma-go/internal/getopt"
	"github.com/rdma-go/rdma-go/verbs"
)

// Each tool's getopt string, as rdma-core 44 has it.
var optstrings = map[Kind]string{
	RC:  "p:d:i:s:m:r:n:l:eg:oOPtcjN",
	UC:  "p:d:i:s:m:r:n:l:eg:c",
	UD:  "p:d:i:s:r:n:l:eg:c",
	SRQ: "p:d:i:s:m:q:r:n:l:eog:c",
}

var longOpts = []getopt.Option{
	{Short: 'p', Long: "port", Arg: getopt.RequiredArg},
	{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg},
	{Short: 'i', Long: "ib-port", Arg: getopt.RequiredArg},
	{Short: 's', Long: "size", Arg: getopt.RequiredArg},
	{Short: 'm', Long: "mtu", Arg: getopt.RequiredArg},
	{Short: 'q', Long: "num-qp", Arg: getopt.RequiredArg},
	{Short: 'r', Long: "rx-depth", Arg: getopt.RequiredArg},
	{Short: 'n', Long: "iters", Arg: getopt.RequiredArg},
	{Short: 'l', Long: "sl", Arg: getopt.RequiredArg},
	{Short: 'e', Long: "events", Arg: getopt.NoArg},
	{Short: 'g', Long: "gid-idx", Arg: getopt.RequiredArg},
	{Short: 'o', Long: "odp", Arg: getopt.NoArg},
	{Short: 'O', Long: "iodp", Arg: getopt.NoArg},
	{Short: 'P', Long: "prefetch", Arg: getopt.NoArg},
	{Short: 't', Long: "ts", Arg: getopt.NoArg},
	{Short: 'c', Long: "chk", Arg: getopt.NoArg},
	{Short: 'j', Long: "dm", Arg: getopt.NoArg},
	{Short: 'N', Long: "new_send", Arg: getopt.NoArg},
}

// longsFor keeps the long options whose letter the tool's optstring has.
func longsFor(k Kind) []getopt.Option {
	var out []getopt.Option
	for _, o := range longOpts {
		for _, c := range optstrings[k] {
			if c == o.Short {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

func usage(w io.Writer, k Kind, prog string) {
	fmt.Fprintf(w, "Usage:\n")
	fmt.Fprintf(w, "  %s            start a server and wait for connection\n", prog)
	fmt.Fprintf(w, "  %s <host>     connect to server at <host>\n", prog)
	fmt.Fprintf(w, "\nOptions:\n")
	fmt.Fprintf(w, "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n")
	fmt.Fprintf(w, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(w, "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n")
	if k == UD {
		fmt.Fprintf(w, "  -s, --size=<size>      size of message to exchange (default 2048)\n")
	} else {
		fmt.Fprintf(w, "  -s, --size=<size>      size of message to exchange (default 4096)\n")
		fmt.Fprintf(w, "  -m, --mtu=<size>       path MTU (default 1024)\n")
	}
	if k == SRQ {
		fmt.Fprintf(w, "  -q, --num-qp=<num>     number of QPs to use (default 16)\n")
	}
	fmt.Fprintf(w, "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n")
	if k == SRQ {
		fmt.Fprintf(w, "  -n, --iters=<iters>    number of exchanges per QP(default 1000)\n")
	} else {
		fmt.Fprintf(w, "  -n, --iters=<iters>    number of exchanges (default 1000)\n")
	}
	fmt.Fprintf(w, "  -l, --sl=<sl>          service level value\n")
	fmt.Fprintf(w, "  -e, --events           sleep on CQ events (default poll)\n")
	fmt.Fprintf(w, "  -g, --gid-idx=<gid index> local port gid index\n")
	switch k {
	case RC:
		fmt.Fprintf(w, "  -o, --odp\t\t    use on demand paging\n")
		fmt.Fprintf(w, "  -O, --iodp\t\t    use implicit on demand paging\n")
		fmt.Fprintf(w, "  -P, --prefetch\t    prefetch an ODP MR\n")
		fmt.Fprintf(w, "  -t, --ts\t            get CQE with timestamp\n")
		fmt.Fprintf(w, "  -c, --chk\t            validate received buffer\n")
		fmt.Fprintf(w, "  -j, --dm\t            use device memory\n")
		fmt.Fprintf(w, "  -N, --new_send            use new post send WR API\n")
	case SRQ:
		fmt.Fprintf(w, "  -o, --odp\t\t    use on demand paging\n")
		fmt.Fprintf(w, "  -c, --chk              validate received buffer\n")
	default:
		fmt.Fprintf(w, "  -c, --chk              validate received buffer\n")
	}
}

// Main runs the pingpong k with the command-line arguments args (without
// the program name) and returns the exit status.
func Main(k Kind, args []string, stdout, stderr io.Writer) int {
	prog := filepath.Base(os.Args[0])
	cfg := Defaults(k)
	cfg.Stdout, cfg.Stderr = stdout, stderr
	p := getopt.New(prog, optstrings[k], longsFor(k))
	p.Stderr = stderr
	res, err := p.Parse(args)
	if err != nil {
		usage(stdout, k, prog)
		return 1
	}
	num := func(s string) int { n, _, _ := getopt.Strtol(s, 0); return int(int32(n)) }
	for _, o := range res.Opts {
		v := o.Value
		switch o.Option.Short {
		case 'p':
			port := num(v)
			if port < 0 || port > 65535 {
				usage(stdout, k, prog)
				return 1
			}
			cfg.Port = port
		case 'd':
			cfg.Device = v
		case 'i':
			cfg.IBPort = num(v)
			if cfg.IBPort < 1 {
				usage(stdout, k, prog)
				return 1
			}
		case 's':
			cfg.Size = num(v)
		case 'm':
			n, _, _ := getopt.Strtol(v, 0)
			m, ok := verbs.MTUFromBytes(int(n))
			if !ok {
				usage(stdout, k, prog)
				return 1
			}
			cfg.MTU = m
		case 'q':
			cfg.NumQP = num(v)
		case 'r':
			cfg.RxDepth = num(v)
		case 'n':
			cfg.Iters = num(v)
		case 'l':
			cfg.SL = num(v)
		case 'e':
			cfg.Events = true
		case 'g':
			cfg.GIDIndex = num(v)
		case 'c':
			cfg.Check = true
		case 'o', 'O', 'P':
			fmt.Fprintf(stderr, "The device isn't ODP capable or does not support RC send and receive with ODP\n")
			return 1
		case 't':
			fmt.Fprintf(stderr, "The device isn't completion timestamp capable\n")
			return 1
		case 'j':
			fmt.Fprintf(stderr, "Device doesn't support dm allocation\n")
			return 1
		case 'N':
			fmt.Fprintf(stderr, "The new post send API (ibv_wr_*) is not supported by this tool yet\n")
			return 1
		}
	}
	switch len(res.Args) {
	case 0:
	case 1:
		cfg.Host = res.Args[0]
	default:
		usage(stdout, k, prog)
		return 1
	}
	if k == SRQ && cfg.NumQP >= maxSRQQPs-1 {
		fmt.Fprintf(stderr, "num_qp %d must be less than %d\n", cfg.NumQP, maxSRQQPs-1)
		return 1
	}
	if cfg.Size < 1 || cfg.RxDepth < 1 || cfg.Iters < 1 || (k == SRQ && cfg.NumQP < 1) {
		usage(stdout, k, prog)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	return 0
}
