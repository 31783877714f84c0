package main

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHostileUploads sends serve what an attacker would, as the admin (the
// worst case: past authentication): an oversize body streamed without end
// in sight, an XML entity-expansion bomb, an external entity, and a body
// that is not XML. Each is refused with a 4xx within seconds, serve stays
// ready, and the heap does not grow with the size of the attack.
func TestHostileUploads(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_INBOUND_IP_LIMIT": "0"})

	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">` +
		`<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">` +
		`<!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>` +
		`<rLoteDE xmlns="http://ekuatia.set.gov.py/sifen/xsd"><rDE>&lol9;</rDE></rLoteDE>`
	xxe := `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>` +
		`<rLoteDE xmlns="http://ekuatia.set.gov.py/sifen/xsd"><rDE>&x;</rDE></rLoteDE>`
	tests := []struct {
		name string
		body func() (io.Reader, string)
	}{
		{"Oversize", func() (io.Reader, string) { return oversizeUpload(256 << 20) }},
		{"EntityBomb", func() (io.Reader, string) { return uploadBody(laughs) }},
		{"ExternalEntity", func() (io.Reader, string) { return uploadBody(xxe) }},
		{"NotXML", func() (io.Reader, string) { return uploadBody("\x00\x01 not xml at all") }},
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, ctype := tc.body()
			req, err := http.NewRequest(http.MethodPost, sm.url+"/documents", body)
			require.NoError(t, err)
			req.Header.Set("Content-Type", ctype)
			req.SetBasicAuth("admin", "pw")
			start := time.Now()
			resp, err := client.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.GreaterOrEqual(t, resp.StatusCode, 400, string(b))
				require.Less(t, resp.StatusCode, 500, string(b))
				require.NotContains(t, string(b), "root:", "the external entity was not read")
				t.Logf("%s: %d in %s", tc.name, resp.StatusCode, time.Since(start).Round(time.Millisecond))
			} else {
				// serve may close the connection on an oversize body
				// once it has answered 413.
				require.Equal(t, "Oversize", tc.name, "%v", err)
			}
			require.Less(t, time.Since(start), 10*time.Second)
			code, _, _ := getStatus(sm.url+"/readyz", "", "")
			require.Equal(t, http.StatusOK, code, "serve stays ready")
		})
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("heap in use %d MiB before, %d MiB after a 256 MiB upload and the bombs",
		before.HeapInuse>>20, after.HeapInuse>>20)
	require.Less(t, after.HeapInuse, before.HeapInuse+64<<20, "the heap grew with the attack")
}

// uploadBody is the documents form with xml as the file.
func uploadBody(xml string) (io.Reader, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("env", "test")
	fw, _ := mw.CreateFormFile("file", "lote.xml")
	_, _ = fw.Write([]byte(xml))
	_ = mw.Close()
	return &b, mw.FormDataContentType()
}

// oversizeUpload streams a form whose file is n bytes of XML-looking text,
// generated as it is read (the test holds none of it).
func oversizeUpload(n int64) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("env", "test")
		fw, _ := mw.CreateFormFile("file", "lote.xml")
		chunk := []byte(strings.Repeat("<rDE>x</rDE>", 1<<12))
		for written := int64(0); written < n; written += int64(len(chunk)) {
			if _, err := fw.Write(chunk); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		_ = mw.Close()
		pw.Close()
	}()
	return pr, mw.FormDataContentType()
}
