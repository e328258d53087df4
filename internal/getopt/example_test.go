package getopt_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/rdma-go/rdma-go/internal/getopt"
)

// How ibv_rc_pingpong reads its command line.
func Example() {
	p := getopt.New("ibv_rc_pingpong", "p:d:i:s:m:r:n:l:eg:oOPtcjN", []getopt.Option{
		{Short: 'p', Long: "port", Arg: getopt.RequiredArg},
		{Short: 'd', Long: "ib-dev", Arg: getopt.RequiredArg},
		{Short: 's', Long: "size", Arg: getopt.RequiredArg},
		{Short: 'n', Long: "iters", Arg: getopt.RequiredArg},
		{Short: 'e', Long: "events", Arg: getopt.NoArg},
		{Short: 'g', Long: "gid-idx", Arg: getopt.RequiredArg},
	})
	p.Stderr = os.Stdout // for the example's output

	r, err := p.Parse([]string{"192.0.2.1", "-eg1", "--ib-d", "rxe0", "--iter=0x10"})
	if err != nil {
		return // the tool prints its usage and exits 1
	}
	for _, o := range r.Opts {
		switch o.Option.Short {
		case 'n':
			n, _, _ := getopt.Strtol(o.Value, 0)
			fmt.Println("iters", n)
		case 'g':
			fmt.Println("gid index", getopt.Atoi(o.Value))
		default:
			fmt.Printf("%s %q\n", o.Name, o.Value)
		}
	}
	fmt.Println("operands", r.Args)

	_, err = p.Parse([]string{"--i", "1"})
	var e *getopt.Error
	fmt.Println(errors.As(err, &e) && e.Kind == getopt.AmbiguousOption)
	// Output:
	// -e ""
	// gid index 1
	// --ib-dev "rxe0"
	// iters 16
	// operands [192.0.2.1]
	// ibv_rc_pingpong: option '--i' is ambiguous; possibilities: '--ib-dev' '--iters'
	// true
}
