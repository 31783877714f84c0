package sifen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/balde-throttle/balde/throttle"
)

// maxFileSize bounds one DE or lot file: 8 MiB, as the web upload.
const maxFileSize = 8 << 20

// XMLFiles expands paths as a batch command takes them: a file as is, a
// directory's *.xml files (any case, not recursively) in name order, each
// path once. An error names a path that cannot be read, or a directory
// without any .xml file.
func XMLFiles(paths []string) ([]string, error) {
	var files []string
	seen := make(map[string]bool)
	add := func(p string) {
		if clean := filepath.Clean(p); !seen[clean] {
			seen[clean] = true
			files = append(files, p)
		}
	}
	for _, a := range paths {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			add(a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, e := range entries {
			if !e.IsDir() && strings.EqualFold(filepath.Ext(e.Name()), ".xml") {
				add(filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: no .xml file in the directory", a)
		}
	}
	return files, nil
}

// FileDE is one DE read from a file by ReadFiles, or a file that gave none
// (DE zero). Err is nil when the DE can be imported, else a *fileError: the
// file is unreadable, too large or malformed, or the DE is unfit (ErrUnfit)
// or repeats an earlier DE's CDC.
type FileDE struct {
	File string
	DE   DE
	Err  error
}

// fileError says why a file, or one DE of it (CDC), cannot be imported;
// AlsoIn is the earlier file holding the same CDC, when that is why.
type fileError struct {
	File   string
	CDC    string // empty when the whole file is refused
	AlsoIn string
	Err    error
}

func (e *fileError) Error() string {
	switch {
	case e.AlsoIn != "":
		return fmt.Sprintf("%s: CDC %s is also in %s", e.File, e.CDC, e.AlsoIn)
	case e.CDC != "":
		return fmt.Sprintf("%s: CDC %s: %v", e.File, e.CDC, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

// Unwrap returns the reason (nil for a repeated CDC).
func (e *fileError) Unwrap() error { return e.Err }

// ReadFiles reads every file (at most maxFileSize bytes each) and returns its
// DEs in order, one FileDE per DE or per file that gave none. It stores and
// sends nothing. An unsigned DE is fit only when
// allowUnsigned and env is EnvTest (checkFit).
func ReadFiles(ctx context.Context, files []string, env Env, allowUnsigned bool) (des []FileDE) {
	where := make(map[string]string) // CDC → file
	for _, f := range files {
		lot, err := readLotFile(ctx, f)
		if err != nil {
			des = append(des, FileDE{File: f, Err: &fileError{File: f, Err: err}})
			continue
		}
		for _, de := range lot.DEs {
			fd := FileDE{File: f, DE: de}
			if prev, ok := where[de.CDC]; ok {
				fd.Err = &fileError{File: f, CDC: de.CDC, AlsoIn: prev}
			} else if err := checkFit(env, de, allowUnsigned); err != nil {
				fd.Err = &fileError{File: f, CDC: de.CDC, Err: err}
			} else {
				where[de.CDC] = f
			}
			des = append(des, fd)
		}
	}
	return des
}

// readLotFile reads and parses one file of at most maxFileSize bytes.
func readLotFile(ctx context.Context, name string) (Lote, error) {
	f, err := os.Open(name)
	if err != nil {
		return Lote{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return Lote{}, err
	}
	if len(data) > maxFileSize {
		return Lote{}, fmt.Errorf("larger than %d MB (the most one file may hold, as in the web upload)", maxFileSize>>20)
	}
	return parseLoteContext(ctx, data)
}

// Imported is what ImportFiles did with one DE: Err is nil when it became
// the draft Document, a *CDCError when Document (without its XML) holds its
// CDC (a rerun finds its sent documents so), else why the import failed.
type Imported struct {
	File     string
	DE       DE
	Document Document
	Err      error
}

// Watched reports whether SendFiles waits for the send of the DE's document:
// another send is sending it now with this DE's content
// (docs/decisions/0230).
func (im Imported) Watched() bool {
	var held *CDCError
	return errors.As(im.Err, &held) && held.SendInProgress() && !held.OtherContent
}

// ImportFiles imports each DE of des (from ReadFiles, none with an Err) as a
// draft of env on its own (ImportReplacing when replace): a held CDC is
// reported without refusing the rest. It returns one Imported per DE
// handled, stopping early when ctx ends or the store fails (that error).
func (s *Sender) ImportFiles(ctx context.Context, des []FileDE, env Env, replace bool) ([]Imported, error) {
	imp := s.Import
	if replace {
		imp = s.ImportReplacing
	}
	return importFiles(ctx, imp, des, env)
}

func importFiles(ctx context.Context, imp func(context.Context, []byte, Env) ([]Document, error), des []FileDE, env Env) ([]Imported, error) {
	out := make([]Imported, 0, len(des))
	for _, fd := range des {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if fd.Err != nil {
			return out, fmt.Errorf("sifen: import %s: %w", fd.File, fd.Err)
		}
		docs, err := imp(ctx, fd.DE.XML, env)
		var held *CDCError
		switch {
		case err == nil:
			out = append(out, Imported{File: fd.File, DE: fd.DE, Document: docs[0]})
		case errors.As(err, &held):
			out = append(out, Imported{File: fd.File, DE: fd.DE, Document: held.Document, Err: err})
		case errors.Is(err, throttle.ErrStoreUnavailable):
			return out, err
		default:
			out = append(out, Imported{File: fd.File, DE: fd.DE, Err: err})
		}
	}
	return out, nil
}

// SendFiles sends DE files as `balde sifen-send` does: Resolve (an
// EventResolved per document settled, EventResolveFailed on a failure other
// than the store's), ImportFiles of des (with cfg.Replace; an EventImported
// per DE), then SendDocuments of the drafts and of the documents Watched.
// The error is a store failure, or ctx's when it ends during the imports.
func (s *Sender) SendFiles(ctx context.Context, des []FileDE, env Env, cfg BatchConfig) ([]Imported, []DocResult, error) {
	resolved, err := s.Resolve(ctx)
	for i := range resolved {
		cfg.emit(Event{Kind: EventResolved, Resolved: &resolved[i]})
	}
	if errors.Is(err, throttle.ErrStoreUnavailable) {
		return nil, nil, err
	}
	if err != nil {
		cfg.emit(Event{Kind: EventResolveFailed, Err: err})
	}
	imported, err := s.ImportFiles(ctx, des, env, cfg.Replace)
	var drafts []Document
	for i, im := range imported {
		cfg.emit(Event{Kind: EventImported, Imported: &imported[i]})
		if im.Err == nil || im.Watched() {
			drafts = append(drafts, im.Document)
		}
	}
	if err != nil {
		return imported, nil, err
	}
	results, err := SendDocuments(ctx, s, drafts, cfg)
	return imported, results, err
}
