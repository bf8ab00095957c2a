package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// A handler that panics sends no answer; it is counted as a 500, not as
// the 200 an unset status would otherwise mean.
func TestInstrumentCountsPanicAs500(t *testing.T) {
	m, err := newMetrics(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := m.instrument("boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		h(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	ok := m.instrument("fine", func(http.ResponseWriter, *http.Request) {})
	ok(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	for _, c := range []struct {
		handler, code string
		want          float64
	}{{"boom", "500", 1}, {"boom", "200", 0}, {"fine", "200", 1}} {
		var d dto.Metric
		if err := m.requests.WithLabelValues(c.handler, c.code).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetCounter().GetValue(); got != c.want {
			t.Errorf("requests{%s,%s} = %v, want %v", c.handler, c.code, got, c.want)
		}
	}
}
