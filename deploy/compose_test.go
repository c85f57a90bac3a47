package deploy

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const composeFile = "../docker-compose.yml"

// The part of a Compose file these tests read. docker-compose itself checks
// the full schema (TestComposeConfig).
type compose struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
	Secrets  map[string]struct {
		File string `json:"file"`
	} `json:"secrets"`
}

// serviceSecret is one entry of a service's secrets: the short form (the
// secret's name) or the long one (source, target).
type serviceSecret struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

func (s *serviceSecret) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &s.Source)
	}
	type long serviceSecret
	return json.Unmarshal(b, (*long)(s))
}

// Path is where Compose mounts the secret in the container.
func (s serviceSecret) Path() string {
	t := s.Target
	if t == "" {
		t = s.Source
	}
	if strings.HasPrefix(t, "/") {
		return t
	}
	return "/run/secrets/" + t
}

type composeService struct {
	Build           any               `json:"build"`
	Image           string            `json:"image"`
	Hostname        string            `json:"hostname"`
	Command         []string          `json:"command"`
	Environment     map[string]string `json:"environment"`
	Ports           []string          `json:"ports"`
	Volumes         []string          `json:"volumes"`
	Secrets         []serviceSecret   `json:"secrets"`
	Restart         string            `json:"restart"`
	StopGracePeriod string            `json:"stop_grace_period"`
	Healthcheck     *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return c
}

// setting is a node's value for a flag: --name=v or --name v in the command,
// else QUEEN_NAME in the environment, else the image's default (ok false).
func (s composeService) setting(name string) (string, bool) {
	for i, a := range s.Command {
		for _, dash := range []string{"--", "-"} {
			if v, ok := strings.CutPrefix(a, dash+name+"="); ok {
				return v, true
			}
			if a == dash+name && i+1 < len(s.Command) {
				return s.Command[i+1], true
			}
		}
	}
	env := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	if v, ok := s.Environment["QUEEN_"+env]; ok {
		return v, ok
	}
	// The JWT flags are also JWT_* (spec §4.17), read after QUEEN_JWT_*.
	if strings.HasPrefix(name, "jwt-") {
		v, ok := s.Environment[env]
		return v, ok
	}
	return "", false
}

func TestComposeCluster(t *testing.T) {
	c := loadCompose(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range c.Services {
			if !yield(n) {
				return
			}
		}
	})
	if want := []string{"queen-1", "queen-2", "queen-3"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}

	hostPorts := map[string]string{}
	volumes := map[string]string{}
	for _, name := range names {
		s := c.Services[name]
		t.Run(name, func(t *testing.T) {
			must := func(flag string) string {
				v, ok := s.setting(flag)
				if !ok {
					t.Errorf("--%s is not set", flag)
				}
				return v
			}
			if got := must("node-id"); got != name {
				t.Errorf("--node-id %q, want %q", got, name)
			}
			// Other nodes reach this one by its service name on the
			// compose network.
			if got := must("advertise-addr"); got != name {
				t.Errorf("--advertise-addr %q, want the service name %q", got, name)
			}

			gossipPort := "6635"
			if v, ok := s.setting("gossip-addr"); ok {
				_, p, err := net.SplitHostPort(v)
				if err != nil {
					t.Fatalf("--gossip-addr %q: %v", v, err)
				}
				gossipPort = p
			}
			var join, want []string
			for _, a := range strings.Split(must("join"), ",") {
				join = append(join, strings.TrimSpace(a))
			}
			for _, other := range names {
				if other != name {
					want = append(want, net.JoinHostPort(other, gossipPort))
				}
			}
			if slices.Sort(join); !slices.Equal(join, want) {
				t.Errorf("--join %v, want the other two nodes %v", join, want)
			}
			if got := must("bootstrap-expect"); got != strconv.Itoa(len(names)) {
				t.Errorf("--bootstrap-expect %q, want %d", got, len(names))
			}

			// Its own named volume at the data dir.
			dataDir := "/data" // the image's QUEEN_DATA_DIR
			if v, ok := s.setting("data-dir"); ok {
				dataDir = v
			}
			vol := ""
			for _, v := range s.Volumes {
				parts := strings.Split(v, ":")
				if len(parts) >= 2 && parts[1] == dataDir {
					vol = parts[0]
				}
			}
			if vol == "" || strings.ContainsAny(vol, "/.") {
				t.Errorf("volumes %v: want a named volume at %s", s.Volumes, dataDir)
			} else if _, ok := c.Volumes[vol]; !ok {
				t.Errorf("volume %q is not declared under the top-level volumes", vol)
			} else if other, dup := volumes[vol]; dup {
				t.Errorf("volume %q is also %s's", vol, other)
			}
			volumes[vol] = name

			// HTTP published on a host port of its own.
			published := false
			for _, p := range s.Ports {
				p = strings.TrimSuffix(p, "/tcp")
				i := strings.LastIndex(p, ":")
				if i < 0 || p[i+1:] != "6632" {
					continue
				}
				hostPart := p[:i] // [ip:]port
				hp := hostPart[strings.LastIndex(hostPart, ":")+1:]
				n, err := strconv.Atoi(hp)
				if err != nil || n < 1 || n > 65535 {
					t.Errorf("port %q: bad host port", p)
					continue
				}
				if other, dup := hostPorts[hp]; dup {
					t.Errorf("host port %s is also %s's", hp, other)
				}
				hostPorts[hp] = name
				published = true
			}
			if !published {
				t.Errorf("ports %v: the HTTP API (6632) is not published", s.Ports)
			}

			if s.Restart != "unless-stopped" {
				t.Errorf("restart %q, want unless-stopped", s.Restart)
			}
			if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d < 30*time.Second {
				t.Errorf("stop_grace_period %q, want >= 30s (Docker's default 10s may cut the leadership transfer)", s.StopGracePeriod)
			}
			if s.Build == nil || s.Image == "" {
				t.Errorf("want build: and image:, so all nodes run the image built from the Dockerfile")
			}
			if s.Healthcheck != nil && (len(s.Healthcheck.Test) == 0 || s.Healthcheck.Test[0] != "CMD") {
				t.Errorf("healthcheck %v: the image has no shell, use the exec form [\"CMD\", ...]", s.Healthcheck.Test)
			}
		})
	}
	if hostPorts["6632"] != "queen-1" {
		t.Errorf("host port 6632 is %q's, want queen-1's", hostPorts["6632"])
	}
}

// TestComposeConfig has docker-compose validate the file against its schema,
// when docker-compose is installed (Debian: apt-get install docker-compose).
func TestComposeConfig(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Skip("docker-compose is not on PATH, so `docker-compose config -q` was NOT run; " +
			"install it (Debian: apt-get install -y docker-compose) to validate docker-compose.yml against the Compose schema")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-f", composeFile, "config", "-q")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -f %s config -q: %v\n%s", bin, composeFile, err, out)
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Logf("docker-compose config -q said:\n%s", out)
	}
}

// dockerfile is the Dockerfile as instructions: continuation lines joined,
// comments and blank lines dropped, keyword upper-cased.
func dockerfile(t *testing.T) [][2]string {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var ins [][2]string
	var cur string
	for _, line := range strings.Split(string(data), "\n") {
		trim := strings.TrimSpace(line)
		if cur == "" && (trim == "" || strings.HasPrefix(trim, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(trim, "\\"); ok {
			cur += cont + " "
			continue
		}
		cur += trim
		kw, rest, _ := strings.Cut(cur, " ")
		ins = append(ins, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
		cur = ""
	}
	return ins
}

// TestDockerfile checks that the image agrees with the compose file and the
// Kubernetes manifests: ports, data dir, user, bind addresses, entrypoint.
func TestDockerfile(t *testing.T) {
	ins := dockerfile(t)
	// The final stage: everything after the last FROM.
	last := 0
	froms := 0
	for i, in := range ins {
		if in[0] == "FROM" {
			last, froms = i, froms+1
		}
	}
	if froms < 2 {
		t.Errorf("%d FROM lines, want a multi-stage build", froms)
	}
	final := ins[last:]
	got := map[string][]string{}
	for _, in := range final {
		got[in[0]] = append(got[in[0]], in[1])
	}
	one := func(kw string) string {
		if len(got[kw]) != 1 {
			t.Errorf("final stage: %d %s instructions, want 1", len(got[kw]), kw)
			return ""
		}
		return got[kw][0]
	}

	if u := one("USER"); u != "65532:65532" && u != "65532" {
		t.Errorf("USER %q, want 65532 (deploy/k8s runs as it, and runAsNonRoot needs a numeric uid)", u)
	}
	if v := one("VOLUME"); v != `["/data"]` && v != "/data" {
		t.Errorf("VOLUME %q, want /data", v)
	}
	expose := strings.Fields(one("EXPOSE"))
	slices.Sort(expose)
	if want := []string{"6632/tcp", "6633/tcp", "6634/tcp", "6635/tcp", "6635/udp"}; !slices.Equal(expose, want) {
		t.Errorf("EXPOSE %v, want %v", expose, want)
	}
	env := map[string]string{}
	for _, e := range got["ENV"] {
		for _, kv := range strings.Fields(e) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Errorf("ENV %q: use KEY=value", e)
			}
			env[k] = v
		}
	}
	for k, want := range map[string]string{
		"QUEEN_DATA_DIR":    "/data",
		"QUEEN_HTTP_ADDR":   "0.0.0.0:6632",
		"QUEEN_GRPC_ADDR":   "0.0.0.0:6633",
		"QUEEN_RAFT_ADDR":   "0.0.0.0:6634",
		"QUEEN_GOSSIP_ADDR": "0.0.0.0:6635",
	} {
		if env[k] != want {
			t.Errorf("ENV %s=%q, want %q", k, env[k], want)
		}
	}
	if ep := one("ENTRYPOINT"); ep != `["/usr/local/bin/queen-node"]` {
		t.Errorf("ENTRYPOINT %s, want the binary in exec form", ep)
	}
	if hc := one("HEALTHCHECK"); hc != "" && !strings.Contains(hc, `CMD ["/usr/local/bin/queen-healthcheck"]`) {
		t.Errorf("HEALTHCHECK %q: want the exec form of queen-healthcheck (no shell in the image)", hc)
	}

	// The builds: static, trimmed binaries of ./cmd/queen-node and of the
	// health check.
	built := map[string]bool{}
	for _, in := range ins[:last] {
		if in[0] != "RUN" {
			continue
		}
		for _, cmd := range strings.Split(in[1], "&&") {
			if !strings.Contains(cmd, "go build") {
				continue
			}
			for _, pkg := range []string{"./cmd/queen-node", "./deploy/healthcheck"} {
				if strings.HasSuffix(strings.TrimSpace(cmd), " "+pkg) {
					built[pkg] = true
				}
			}
			for _, want := range []string{"-trimpath", `-ldflags "-s -w`} {
				if !strings.Contains(cmd, want) {
					t.Errorf("build command %q lacks %s", strings.TrimSpace(cmd), want)
				}
			}
		}
	}
	if !built["./cmd/queen-node"] || !built["./deploy/healthcheck"] {
		t.Errorf("built %v, want ./cmd/queen-node and ./deploy/healthcheck", built)
	}
	cgoOff := false
	for _, in := range ins[:last] {
		if (in[0] == "ENV" || in[0] == "RUN") && strings.Contains(in[1], "CGO_ENABLED=0") {
			cgoOff = true
		}
	}
	if !cgoOff {
		t.Error("CGO_ENABLED=0 is not set for the build: the binary would not be static")
	}

	// Compose overrides nothing the image fixes, and says the same data dir.
	c := loadCompose(t)
	for name, s := range c.Services {
		if v, ok := s.Environment["QUEEN_DATA_DIR"]; ok && v != env["QUEEN_DATA_DIR"] {
			t.Errorf("%s: QUEEN_DATA_DIR %q, the image's VOLUME is %q", name, v, env["QUEEN_DATA_DIR"])
		}
	}
}
