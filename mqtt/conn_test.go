package mqtt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// TestSubscribeOverTLS: the subscriber's own connection function dials
// ssl:// brokers with Options.TLS, as paho's does.
func TestSubscribeOverTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "tls", Address: "127.0.0.1:0",
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}})
	if err := srv.AddListener(tcp); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	db := openDB(t)
	s, _ := runSubscriber(t, db, Options{Brokers: []string{"ssl://" + tcp.Address()}, ClientID: "strata-tls",
		TLS: &tls.Config{RootCAs: roots}, Subscriptions: []Subscription{{Filter: "s/#"}}})
	waitSubscribed(t, s)
	pub := paho.NewClient(paho.NewClientOptions().AddBroker("ssl://" + tcp.Address()).SetClientID("pub-tls").
		SetTLSConfig(&tls.Config{RootCAs: roots}))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	publish(t, pub, "s/1", []byte("m v=1 1"))
	waitMessages(t, s, 0, 1)
	if se := queryAll(t, db, "m"); len(se) != 1 {
		t.Fatalf("stored %+v", se)
	}

	// Without the roots, the broker's certificate is refused.
	u, err := url.Parse("ssl://" + tcp.Address())
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := dialBroker(u, *paho.NewClientOptions()); err == nil {
		conn.Close()
		t.Fatal("an unknown certificate was accepted")
	}
}
