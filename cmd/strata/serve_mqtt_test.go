package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mqtt"
	"github.com/stratadb/strata/mqtt/mosquittotest"
)

func TestSplitTopicFormat(t *testing.T) {
	f := func(in string, def mqtt.Format, filter string, format mqtt.Format) {
		t.Helper()
		gf, gfmt := splitTopicFormat(in, def)
		if gf != filter || gfmt != format {
			t.Errorf("splitTopicFormat(%q) = %q, %v; want %q, %v", in, gf, gfmt, filter, format)
		}
	}
	f("plant/#", mqtt.FormatLineProtocol, "plant/#", mqtt.FormatLineProtocol)
	f("plant/#=json", mqtt.FormatLineProtocol, "plant/#", mqtt.FormatJSON)
	f("spBv1.0/#=sparkplugb", mqtt.FormatJSON, "spBv1.0/#", mqtt.FormatSparkplugB)
	f("a=b/#", mqtt.FormatJSON, "a=b/#", mqtt.FormatJSON)
	f("a/x=lp", mqtt.FormatJSON, "a/x", mqtt.FormatLineProtocol)
}

// serveChild is 'strata serve' run as a process of its own.
type serveChild struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	addr  string
}

func startServeChild(t *testing.T, subscribed bool, args ...string) *serveChild {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "STRATA_TEST_ARGS="+strings.Join(append([]string{"serve"}, args...), "\n"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &serveChild{cmd: cmd, lines: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			default: // nobody waits for more lines
			}
		}
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	// The subscription may be acknowledged before or after the listener
	// opens.
	subscribedSeen := !subscribed
	timeout := time.After(2 * time.Minute)
	for c.addr == "" || !subscribedSeen {
		select {
		case l := <-c.lines:
			if rest, ok := strings.CutPrefix(l, "strata serve: listening on "); ok {
				c.addr = rest
			}
			if strings.Contains(l, "mqtt: subscribed") {
				subscribedSeen = true
			}
		case err := <-c.done:
			t.Fatalf("strata serve exited: %v", err)
		case <-timeout:
			t.Fatal("strata serve did not start")
		}
	}
	return c
}

// count asks the child's query API for the samples of load.
func (c *serveChild) count(t *testing.T) int {
	t.Helper()
	q := url.Values{"query": {"count_over_time(load[1000s])"}, "time": {"500"}}
	resp, err := http.Get("http://" + c.addr + "/api/v1/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Data.Result) == 0 {
		return 0
	}
	var n int
	fmt.Sscan(body.Data.Result[0].Value[1].(string), &n)
	return n
}

// TestServeMQTTKill9 kills 'strata serve' with SIGKILL twice while 100,000
// QoS 1 messages are published to a real Mosquitto: once while it takes
// messages as they come, once while it works through a backlog the broker
// queued for its persistent session (when many messages are received and
// not yet written). Started a third time, it stores every message the
// broker accepted.
func TestServeMQTTKill9(t *testing.T) {
	const total = 100_000
	b := mosquittotest.Start(t)
	dir := filepath.Join(t.TempDir(), "db")
	args := []string{"--db", dir, "--listen", "127.0.0.1:0", "--sync", "always",
		"--mqtt-broker", b.URL, "--mqtt-topic", "load/#=lp", "--mqtt-client-id", "strata-kill9"}
	child := startServeChild(t, true, args...)
	kill := func() {
		t.Helper()
		if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-child.done
	}

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL).SetClientID("pub-kill9").SetCleanSession(true))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	accepted := make([]bool, total)
	publish := func(from, to int) {
		t.Helper()
		const window = 1000
		for lo := from; lo < to; lo += window {
			hi := min(lo+window, to)
			toks := make([]paho.Token, 0, window)
			for i := lo; i < hi; i++ {
				// ms timestamps, so that the query API sees each sample.
				toks = append(toks, pub.Publish("load/p", 1, false, fmt.Sprintf("load value=%d %d", i, int64(i)*1e6)))
			}
			for j, tok := range toks {
				accepted[lo+j] = tok.WaitTimeout(time.Minute) && tok.Error() == nil
			}
		}
	}

	// Kill while messages come as they are published.
	publish(0, 10_000)
	kill()
	// Queued by the broker for the session, then taken in a rush by the
	// next process, killed in the middle of it.
	publish(10_000, 60_000)
	child = startServeChild(t, false, args...)
	deadline := time.Now().Add(3 * time.Minute)
	for child.count(t) < 15_000 {
		if time.Now().After(deadline) {
			t.Fatal("the backlog is not taken")
		}
		time.Sleep(10 * time.Millisecond) // polling another process's progress
	}
	kill()
	publish(60_000, total)
	n := 0
	for _, ok := range accepted {
		if ok {
			n++
		}
	}
	if n != total {
		t.Logf("the broker accepted %d of %d publishes", n, total)
	}

	child = startServeChild(t, false, args...)
	for child.count(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("stored %d of %d accepted messages", child.count(t), n)
		}
		time.Sleep(100 * time.Millisecond) // polling another process's progress
	}
	resp, err := http.Get("http://" + child.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`strata_mqtt_messages_total{filter="load/#",format="lp"}`, "strata_mqtt_reconnects_total", `strata_mqtt_lag_seconds{filter="load/#",format="lp"}`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-child.done; err != nil {
		t.Fatalf("strata serve: %v", err)
	}

	db, err := engine.Open(dir, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	se, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "load"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(se) != 1 {
		t.Fatalf("%d series", len(se))
	}
	stored := make(map[int64]float64, total)
	for _, x := range se[0].Samples {
		stored[x.Time/1e6] = x.Value.Float()
	}
	for i, ok := range accepted {
		if v, found := stored[int64(i)]; ok && (!found || v != float64(i)) {
			t.Fatalf("accepted publish %d not stored (found %v, value %v); %d of %d stored", i, found, v, len(stored), n)
		}
	}
}

// Flags that cannot work together, or a batch bound below one, are usage
// errors, not silently ignored or replaced by a default.
func TestMQTTFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mqtt-max-batch", "-1"}, "--mqtt-max-batch -1"},
		{[]string{"--mqtt-max-batch", "0"}, "--mqtt-max-batch 0"},
		{[]string{"--mqtt-tls-key", "k.pem"}, "go together"},
		{[]string{"--mqtt-tls-cert", "c.pem"}, "go together"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		m := addMQTTFlags(fs)
		args := append([]string{"--mqtt-broker", "tcp://127.0.0.1:1", "--mqtt-topic", "a/#"}, c.args...)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		sub, err := m.subscriber(nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: subscriber = %v, %v; want an error with %q", c.args, sub, err, c.want)
		}
	}
}
