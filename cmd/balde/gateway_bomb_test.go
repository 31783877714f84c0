package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
)

// deflated is head, then n bytes of fill, then tail, deflated at the
// best ratio, with its length and CRC-32.
type deflated struct {
	data []byte
	size uint64
	crc  uint32
}

func deflate(t *testing.T, head string, fill byte, n int, tail string) deflated {
	t.Helper()
	var b bytes.Buffer
	fw, err := flate.NewWriter(&b, flate.BestCompression)
	require.NoError(t, err)
	crc := crc32.NewIEEE()
	w := io.MultiWriter(fw, crc)
	_, err = io.WriteString(w, head)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{fill}, 1<<20)
	for left := n; left > 0; left -= len(chunk) {
		_, err = w.Write(chunk[:min(left, len(chunk))])
		require.NoError(t, err)
	}
	_, err = io.WriteString(w, tail)
	require.NoError(t, err)
	require.NoError(t, fw.Close())
	return deflated{data: b.Bytes(), size: uint64(len(head) + n + len(tail)), crc: crc.Sum32()}
}

// zipBomb is the ZIP of d as lote.xml, its header saying it inflates to
// declared bytes (a header that lies when declared < d.size).
func zipBomb(t *testing.T, d deflated, declared uint64) []byte {
	t.Helper()
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	f, err := zw.CreateRaw(&zip.FileHeader{Name: "lote.xml", Method: zip.Deflate, CRC32: d.crc,
		CompressedSize64: uint64(len(d.data)), UncompressedSize64: declared})
	require.NoError(t, err)
	_, err = f.Write(d.data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return z.Bytes()
}

// peakRSS reads a process's peak resident set (VmHWM) and its resident set
// now (VmRSS), in bytes.
func peakRSS(t *testing.T, pid int) (peak, now int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && (fields[0] == "VmHWM:" || fields[0] == "VmRSS:") {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			require.NoError(t, err)
			if fields[0] == "VmHWM:" {
				peak = kb << 10
			} else {
				now = kb << 10
			}
		}
	}
	return peak, now
}

// balde gateway sifen, in a process of its own, under 16 concurrent ZIP
// bombs from a client (make reliability; TestParseLoteZip in sifen checks
// the bound in make test), three times: a siRecepLoteDE of about 544 KB whose
// xDE inflates to 400 MB (its header says so), the same with a header
// that lies (it says 8 MB, what the gateway would inflate), and a lot of
// one rDE holding 8 MB of text (the most a lot's XML may hold, kept while
// it is read). Every bomb is a 400, nothing reaches SIFEN, and the
// process's peak resident set stays under 300 MB. (Before, each 400 MB
// bomb grew the process by about 167 MB: 16 took it to 1.83 GB.) The
// figures are in docs/RELIABILITY.md; -v logs them.
func TestSifenGatewayMemoryUnderZipBombs(t *testing.T) {
	if !reliabilityLong() {
		t.Skip("make reliability only (BALDE_RELIABILITY=1): 16 ZIP bombs, about 30 s")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("SKIP (the gateway's resident set): no /proc")
	}
	sim := startSifenSim(t, sifensim.Config{})
	dir := t.TempDir()
	addr := freeLoopbackAddr(t)
	cmd := childCommand(t, time.Time{}, "gateway", "sifen", "--addr", addr, "--db", "sqlite://"+filepath.Join(dir, "balde.db"),
		"--sifen-url", sim.URL, "--env", "test", "--clients", writeClients(t, dir, "erp "+tokenDigest("erp-token")))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		_ = waitfor.Recv(t, exited, 20*time.Second, "the gateway to exit")
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 60 * time.Second}
	waitReady(t, client, base, &stderr)
	peak, _ := peakRSS(t, cmd.Process.Pid)
	t.Logf("gateway started: peak RSS %d MB", peak>>20)

	const bombs = 16
	const rde = `<rLoteDE><rDE xmlns="http://ekuatia.set.gov.py/sifen/xsd"><DE Id="1"><gOpeDE><dInfoFisc>`
	const rdeEnd = `</dInfoFisc></gOpeDE></DE></rDE></rLoteDE>`
	spaces := deflate(t, "<rLoteDE>", ' ', 400<<20, "</rLoteDE>")
	text := deflate(t, rde, 'A', 8<<20-len(rde)-len(rdeEnd), rdeEnd)
	for _, b := range []struct {
		name string
		zip  []byte
	}{
		{"400 MB, its header says so", zipBomb(t, spaces, spaces.size)},
		{"400 MB, its header says 8 MB", zipBomb(t, spaces, 8<<20)},
		{"8 MB of text in one DE", zipBomb(t, text, text.size)},
	} {
		body, err := sifen.MarshalSOAP(sifen.EnvioLote{ID: "1", XDE: base64.StdEncoding.EncodeToString(b.zip)})
		require.NoError(t, err)
		require.Less(t, len(body), 1_000_000, "%s: a message SIFEN's size rule lets through", b.name)
		var wg sync.WaitGroup
		statuses := make([]int, bombs)
		start := time.Now()
		for i := range statuses {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+sifen.RecepcionPath, bytes.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Content-Type", sifen.SOAPContentType)
				req.Header.Set("Authorization", "Bearer erp-token")
				resp, err := client.Do(req)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			})
		}
		waitfor.Group(t, &wg, 2*time.Minute, "the bombs answered")
		for _, s := range statuses {
			require.Equal(t, http.StatusBadRequest, s, b.name)
		}
		peak, now := peakRSS(t, cmd.Process.Pid)
		t.Logf("%d concurrent bombs (%s; message %d KB): answered 400 in %s; peak RSS so far %d MB, RSS now %d MB",
			bombs, b.name, len(body)>>10, time.Since(start).Round(time.Millisecond), peak>>20, now>>20)
		require.Less(t, peak, int64(300<<20), "the gateway's peak resident set")
	}
	require.Zero(t, sim.Stats().Count("", "", "", ""), "nothing reached SIFEN")
}
