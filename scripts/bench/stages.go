package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
)

// -stages (issue 22): the per-stage CPU budgets, each measured by its
// go test benchmark on the real stores and set beside its budget. The
// benchmarks live beside their code; this runs them from the repository
// root (bench must run there) and prints one row each.
var stageBudgets = []struct {
	pkg, bench, metric string
	budget             float64
	what               string
}{
	{"./httpapi/", "BenchmarkStageFrontPush100", "cpu-µs/msg", 2, "receiving node: decode, validate, answer (push of 100)"},
	{"./fsm/", "BenchmarkStageAppendApplyPush100", "cpu-µs/msg", 3, "each replica: raft-wal append (fsynced) + apply (push of 100)"},
	{"./fsm/", "BenchmarkApplyTransaction", "ns/txn", 20000, "apply a transaction of one ack and one KV put"},
	{"./grpcapi/", "BenchmarkStageForwardPush100", "cpu-µs/msg", 1, "follower to leader forwarding (push of 100)"},
}

func runStages(ctx context.Context, stdout, stderr io.Writer) int {
	pkgs := map[string][]string{}
	var order []string
	for _, s := range stageBudgets {
		if _, ok := pkgs[s.pkg]; !ok {
			order = append(order, s.pkg)
		}
		pkgs[s.pkg] = append(pkgs[s.pkg], s.bench+"$")
	}
	got := map[string]map[string]float64{}
	for _, pkg := range order {
		fmt.Fprintf(stderr, "bench: -stages: go test -bench in %s\n", pkg)
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^("+strings.Join(pkgs[pkg], "|")+")", "-benchtime", "2s", pkg)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(stderr, "bench: -stages: %s: %v\n%s", pkg, err, out.String())
			return 1
		}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
				continue
			}
			name := f[0]
			if i := strings.LastIndexByte(name, '-'); i > 0 { // the GOMAXPROCS suffix
				name = name[:i]
			}
			got[name] = map[string]float64{}
			for i := 2; i+1 < len(f); i += 2 {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					got[name][f[i+1]] = v
				}
			}
		}
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tbenchmark\tmeasured\tbudget\tverdict")
	for _, s := range stageBudgets {
		v, ok := got[s.bench][s.metric]
		verdict := "over"
		switch {
		case !ok:
			verdict = "not measured"
		case v <= s.budget:
			verdict = "within"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f %s\t%.0f\t%s\n", s.what, s.bench, v, s.metric, s.budget, verdict)
	}
	tw.Flush()
	return 0
}
