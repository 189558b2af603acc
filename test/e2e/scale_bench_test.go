/*
Copyright 2026 The Talon Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	controlplanev1 "github.com/talon-capi/talon/api/controlplane/v1beta1"
	"github.com/talon-capi/talon/internal/plane"
	"github.com/talon-capi/talon/internal/quickstart"
	"github.com/talon-capi/talon/test/metrics"
)

// scaleNamespace holds the benchmark's clusters.
const scaleNamespace = "default"

// scaleControllers are the controllers whose reconcile latency and queue the table shows.
var scaleControllers = []string{"cluster", "machine", "taloscontrolplane", "talosconfig", "talosdockercluster", "talosdockermachine"}

// BenchmarkScale is make bench-scale: on one management plane whose managers run as
// separate processes (as talon up runs them), with light simulated nodes (the simulator's
// scale mode) inside the infrastructure manager, it creates single-node clusters in stages
// (TALON_SCALE_CLUSTERS, default 100,500,1000,2000) and reports, for each stage: the time
// until every cluster's Machine is Running with a Ready Node, each controller's reconcile
// latency p50/p99 and deepest workqueue over the stage (from the managers' own metrics),
// each manager's peak resident memory and CPU seconds, and the management API server's
// request rate. Then it changes every cluster's Kubernetes version and reports the same for
// the rolling replacement. A stage that stalls (no cluster became Ready for
// TALON_SCALE_STALL, default 10m) ends the run, and the table says where and why.
// TALON_SCALE_FLAGS adds flags to managers, e.g.
// "talon-control-plane=--kube-api-qps=100 --kube-api-burst=200;cluster-api=--kube-api-qps=50",
// to measure a tuning against the defaults. It never fails on a timing.
func BenchmarkScale(b *testing.B) {
	ctx := b.Context()
	bin, config := benchInputs(b)
	sizes, err := scaleSizes(os.Getenv("TALON_SCALE_CLUSTERS"))
	if err != nil {
		b.Fatal(err)
	}
	stall := 10 * time.Minute
	if v := os.Getenv("TALON_SCALE_STALL"); v != "" {
		if stall, err = time.ParseDuration(v); err != nil {
			b.Fatalf("TALON_SCALE_STALL: %v", err)
		}
	}
	flags, err := scaleFlags(os.Getenv("TALON_SCALE_FLAGS"))
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("HOME", b.TempDir())
	dir := b.TempDir()
	p, err := plane.Start(ctx, plane.Options{Dir: filepath.Join(dir, "scale-plane"), BinDir: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Remove(context.WithoutCancel(ctx)) }()
	if err := quickstart.InstallProviders(ctx, p, config, quickstart.RuntimeSimLight, flags); err != nil {
		b.Fatal(err)
	}
	c, err := p.Client(client.Options{Scheme: quickstart.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	restConfig, err := p.RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		b.Fatal(err)
	}
	manifest, err := plane.RunClusterctl(ctx, bin, p.Kubeconfig(), nil, io.Discard, "generate", "cluster", scaleTemplateName,
		"--config", config, "--infrastructure", "talon", "--target-namespace", scaleNamespace, "--kubernetes-version", oldVersion,
		"--control-plane-machine-count", "1", "--worker-machine-count", "0")
	if err != nil {
		b.Fatal(err)
	}
	apiHost := strings.TrimPrefix(restConfig.Host, "https://")
	s := &scaleRun{b: b, p: p, c: c, kube: kube, manifest: manifest, stall: stall, apiHost: apiHost}

	var rows [][]string
	for b.Loop() {
		created := 0
		for _, n := range sizes {
			stage := s.begin(ctx)
			start := time.Now()
			s.create(ctx, created, n)
			created = n
			ready, why := s.waitReady(ctx, stage, n, func(clusterv1.Machine) bool { return true })
			label := fmt.Sprintf("%d clusters", n)
			rows = append(rows, s.end(ctx, stage, label, fmt.Sprintf("%d of %d Ready after %s", ready, n, seconds(time.Since(start))))...)
			b.Logf("Measured so far:\n%s", strings.Join(rowLines(rows), "\n"))
			if why != "" {
				rows = append(rows, []string{label, "stopped", why})
				break
			}
		}
		if len(rows) > 0 && rows[len(rows)-1][1] == "stopped" {
			continue // no version change of clusters that are not all Ready
		}
		stage := s.begin(ctx)
		start := time.Now()
		s.upgradeAll(ctx, newVersion)
		ready, why := s.waitReady(ctx, stage, created, func(m clusterv1.Machine) bool { return m.Spec.Version == newVersion })
		label := fmt.Sprintf("%d clusters %s -> %s", created, oldVersion, newVersion)
		rows = append(rows, s.end(ctx, stage, label, fmt.Sprintf("%d of %d replaced after %s", ready, created, seconds(time.Since(start))))...)
		if why != "" {
			rows = append(rows, []string{label, "stopped", why})
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	lines := append([]string{"stage\tmeasure\tresult", "-----\t-------\t------"}, rowLines(rows)...)
	if len(flags) > 0 {
		lines = append(lines, "flags\t"+os.Getenv("TALON_SCALE_FLAGS")+"\t")
	}
	_, _ = fmt.Fprintln(tw, strings.Join(lines, "\n"))
	_ = tw.Flush()
}

// scaleTemplateName is the cluster name the template is generated for, replaced by each
// cluster's own.
const scaleTemplateName = "scaletemplate"

// scaleSizes parses a comma-separated list of increasing cluster counts.
func scaleSizes(v string) ([]int, error) {
	if v == "" {
		v = "100,500,1000,2000"
	}
	var sizes []int
	for field := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return nil, fmt.Errorf("TALON_SCALE_CLUSTERS must list increasing cluster counts such as 100,500,1000, not %q", v)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// scaleFlags parses TALON_SCALE_FLAGS: manager=flags, separated by semicolons, each
// manager's flags separated by spaces.
func scaleFlags(v string) (map[string][]string, error) {
	flags := map[string][]string{}
	for entry := range strings.SplitSeq(v, ";") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		name, args, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || !strings.HasPrefix(strings.TrimSpace(args), "--") {
			return nil, fmt.Errorf("TALON_SCALE_FLAGS must read manager=--flag ...;manager=--flag ..., not %q", entry)
		}
		flags[name] = append(flags[name], strings.Fields(args)...)
	}
	return flags, nil
}

// scaleRun is one run of BenchmarkScale.
type scaleRun struct {
	b        *testing.B
	p        *plane.Plane
	c        client.Client
	kube     *kubernetes.Clientset
	manifest []byte
	stall    time.Duration
	apiHost  string // host:port of the management API server, as the managers' clients label it
}

// scaleSample is what the managers and the API server said at one moment.
type scaleSample struct {
	at       time.Time
	families map[string][]*dto.MetricFamily // by manager
	cpu      map[string]time.Duration       // by manager
	requests float64                        // the API server's requests so far
}

// scaleStage is a stage's first sample and the deepest workqueues seen during it.
type scaleStage struct {
	first    scaleSample
	maxDepth map[string]float64 // by controller
}

// sample reads every manager's metrics and CPU time, and with apiServer the API server's
// request count too (its /metrics is megabytes: too costly to read every few seconds).
func (s *scaleRun) sample(ctx context.Context, apiServer bool) scaleSample {
	out := scaleSample{at: time.Now(), families: map[string][]*dto.MetricFamily{}, cpu: map[string]time.Duration{}}
	for _, m := range s.p.Managers() {
		if families, err := scrapeProcessManager(ctx, m); err == nil {
			out.families[m.Name] = families
		} else {
			s.b.Logf("Scraping %s: %v", m.Name, err)
		}
		for _, proc := range s.p.Processes() {
			if proc.Name == m.Name {
				out.cpu[m.Name], _ = proc.CPUTime()
			}
		}
	}
	if !apiServer {
		return out
	}
	if body, err := s.kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); err == nil {
		if families, err := metrics.Parse(bytes.NewReader(body)); err == nil {
			out.requests = sumOf(families, "apiserver_request_total")
		}
	}
	return out
}

// scrapeProcessManager reads the /metrics of a manager the plane runs (its diagnostics
// address, served without authentication there).
func scrapeProcessManager(ctx context.Context, m plane.Manager) ([]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", m.DiagnosticsPort), http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return metrics.Parse(resp.Body)
}

func (s *scaleRun) begin(ctx context.Context) *scaleStage {
	return &scaleStage{first: s.sample(ctx, true), maxDepth: map[string]float64{}}
}

// observe records the workqueue depths of a sample.
func (st *scaleStage) observe(sample scaleSample) {
	for _, families := range sample.families {
		for _, f := range families {
			if f.GetName() != "workqueue_depth" {
				continue
			}
			for _, m := range f.GetMetric() {
				name := labelOf(m, "name")
				st.maxDepth[name] = max(st.maxDepth[name], m.GetGauge().GetValue())
			}
		}
	}
}

// end is the stage's rows: its result, then per manager and controller what the metrics say.
func (s *scaleRun) end(ctx context.Context, st *scaleStage, label, result string) [][]string {
	last := s.sample(ctx, true)
	st.observe(last)
	elapsed := last.at.Sub(st.first.at).Seconds()
	rows := [][]string{{label, "result", result}}
	rows = append(rows, []string{label, "management API server", fmt.Sprintf("%.0f requests/s", (last.requests-st.first.requests)/elapsed)})
	for _, m := range s.p.Managers() {
		for _, proc := range s.p.Processes() {
			if proc.Name != m.Name {
				continue
			}
			peak, _ := proc.PeakMemory()
			cpu := last.cpu[m.Name] - st.first.cpu[m.Name]
			requests := requestsTo(last.families[m.Name], s.apiHost) - requestsTo(st.first.families[m.Name], s.apiHost)
			rows = append(rows, []string{label, m.Name, fmt.Sprintf("peak RSS so far %d MiB, %.0f CPU s (%.0f%% of a core), %.1f requests/s to the management API server",
				peak>>20, cpu.Seconds(), 100*cpu.Seconds()/elapsed, requests/elapsed)})
		}
		for _, controller := range scaleControllers {
			before := histogramOf(st.first.families[m.Name], "controller_runtime_reconcile_time_seconds", controller)
			after := histogramOf(last.families[m.Name], "controller_runtime_reconcile_time_seconds", controller)
			if after == nil {
				continue
			}
			count, p50, p99 := quantiles(before, after)
			rows = append(rows, []string{label, controller + " reconciles", fmt.Sprintf("%d, p50 %s, p99 %s, deepest queue %.0f",
				count, latency(p50), latency(p99), st.maxDepth[controller])})
		}
	}
	return rows
}

// create makes the clusters numbered from up to, but not including, to, four at a time.
func (s *scaleRun) create(ctx context.Context, from, to int) {
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				if err := s.createOne(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			s.b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		s.b.Fatal(err)
	default:
	}
}

func (s *scaleRun) createOne(ctx context.Context, i int) error {
	name := fmt.Sprintf("scale-%04d", i)
	objs, err := utilyaml.ToUnstructured(bytes.ReplaceAll(s.manifest, []byte(scaleTemplateName), []byte(name)))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := s.c.Create(ctx, &obj); err != nil && !strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("failed to create %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// waitReady waits until want Machines are Running with a Node and pass ok, sampling the
// metrics as it goes. It returns how many did, and why it gave up if not all.
func (s *scaleRun) waitReady(ctx context.Context, st *scaleStage, want int, ok func(clusterv1.Machine) bool) (int, string) {
	best, progressed := -1, time.Now()
	for {
		list := &clusterv1.MachineList{}
		ready := 0
		if err := s.c.List(ctx, list, client.InNamespace(scaleNamespace)); err == nil {
			for _, m := range list.Items {
				if m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() && m.DeletionTimestamp.IsZero() && ok(m) {
					ready++
				}
			}
		}
		if ready >= want {
			return ready, ""
		}
		if ready > best {
			best, progressed = ready, time.Now()
		}
		if time.Since(progressed) > s.stall {
			return ready, fmt.Sprintf("no more clusters Ready for %s (%d of %d)", s.stall, ready, want)
		}
		st.observe(s.sample(ctx, false))
		select {
		case <-ctx.Done():
			return ready, ctx.Err().Error()
		case <-time.After(10 * time.Second):
		}
	}
}

// upgradeAll changes every cluster's control-plane Kubernetes version.
func (s *scaleRun) upgradeAll(ctx context.Context, version string) {
	list := &controlplanev1.TalosControlPlaneList{}
	if err := s.c.List(ctx, list, client.InNamespace(scaleNamespace)); err != nil {
		s.b.Fatal(err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, version)))
	for i := range list.Items {
		if err := s.c.Patch(ctx, &list.Items[i], patch); err != nil {
			s.b.Fatal(err)
		}
	}
}

// sumOf sums every series of a counter.
func sumOf(families []*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// requestsTo sums a manager's client requests (rest_client_requests_total) to host: at its
// --kube-api-qps, a manager's reconciles wait on its own client rather than on the server.
func requestsTo(families []*dto.MetricFamily, host string) float64 {
	total := 0.0
	for _, f := range families {
		if f.GetName() != "rest_client_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelOf(m, "host") == host {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histogramOf is the histogram of a controller.
func histogramOf(families []*dto.MetricFamily, name, controller string) *dto.Histogram {
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelOf(m, "controller") == controller {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// quantiles are the count, p50 and p99 of the observations after made since before (nil:
// none), interpolated within buckets as Prometheus' histogram_quantile does.
func quantiles(before, after *dto.Histogram) (count uint64, p50, p99 float64) {
	type bucket struct {
		upper float64
		count float64
	}
	if before.GetSampleCount() > after.GetSampleCount() {
		before = nil // the manager restarted during the stage: its counters began again
	}
	buckets := make([]bucket, 0, len(after.GetBucket()))
	for i, b := range after.GetBucket() {
		n := float64(b.GetCumulativeCount())
		if before != nil && i < len(before.GetBucket()) {
			n -= float64(before.GetBucket()[i].GetCumulativeCount())
		}
		buckets = append(buckets, bucket{upper: b.GetUpperBound(), count: n})
	}
	total := float64(after.GetSampleCount() - before.GetSampleCount())
	if total <= 0 {
		return 0, math.NaN(), math.NaN()
	}
	quantile := func(q float64) float64 {
		rank, lower, below := q*total, 0.0, 0.0
		for _, b := range buckets {
			if b.count >= rank {
				if b.count == below {
					return b.upper
				}
				return lower + (b.upper-lower)*(rank-below)/(b.count-below)
			}
			lower, below = b.upper, b.count
		}
		return math.Inf(1) // above the last bucket
	}
	return uint64(total), quantile(0.5), quantile(0.99)
}

// latency formats seconds for the table.
func latency(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case math.IsInf(s, 1):
		return "> last bucket"
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	default:
		return fmt.Sprintf("%.1f s", s)
	}
}
