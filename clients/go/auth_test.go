package threadline_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

// These tests start servers of their own (with --token, with TLS), so they need the local
// server binary and skip when THREADLINE_ADDR points the suite at a running server.

func ownServer(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := ownServerEnv(t, nil, args...)
	return addr
}

// ownServerEnv is ownServer with env added to the server's environment; it also returns the
// file that collects the server's stderr.
func ownServerEnv(t *testing.T, env []string, args ...string) (addr, logPath string) {
	t.Helper()
	if os.Getenv("THREADLINE_ADDR") != "" {
		t.Skip("THREADLINE_ADDR is set: this test starts a server of its own")
	}
	stop, addr, logPath, err := startServerEnv(env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr, logPath
}

func TestToken(t *testing.T) {
	t.Parallel()
	addr := ownServer(t, "--token", "s3cret")
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		opts   []threadline.Option
		reason string
	}{
		{"missing", nil, threadline.ReasonTokenMissing},
		{"wrong", []threadline.Option{threadline.WithToken("guess")}, threadline.ReasonTokenInvalid},
		{"right", []threadline.Option{threadline.WithToken("s3cret")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := threadline.Dial(addr, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("hello")})
			if tc.reason == "" {
				if err != nil || res.GetStatus() != threadline.StatusCompleted {
					t.Fatalf("Run = %v, %v", res, err)
				}
				return
			}
			if threadline.CodeOf(err) != codes.Unauthenticated || threadline.ReasonOf(err) != tc.reason {
				t.Fatalf("err = %v, want UNAUTHENTICATED %s", err, tc.reason)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	roots := selfSignedCert(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	addr := ownServer(t, "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"), "--token", "s3cret")

	c, err := threadline.Dial(addr, threadline.WithTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}), threadline.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Run(t.Context(), &threadline.RunSpec{Prompt: threadline.Text("hello")})
	if err != nil || res.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("Run over TLS = %v, %v", res, err)
	}

	// A plaintext client cannot talk to it.
	plain, err := threadline.Dial(addr, threadline.WithToken("s3cret"), threadline.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.NewState(t.Context(), ""); threadline.CodeOf(err) != codes.Unavailable {
		t.Errorf("plaintext to a TLS server: %v", err)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and localhost and returns a pool trusting it.
func selfSignedCert(t *testing.T, certPath, keyPath string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "threadline-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}
