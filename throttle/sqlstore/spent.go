package sqlstore

import (
	"encoding/binary"
	"fmt"

	"github.com/balde-throttle/balde/internal/sqltime"
	"github.com/balde-throttle/balde/throttle"
)

// encodeSpent packs a rolling window's outstanding spends as varints: the
// first instant in nanoseconds, then each later one as a delta from the one
// before, each followed by its token count. Nil for an empty window.
func encodeSpent(spent []throttle.Spend) []byte {
	if len(spent) == 0 {
		return nil
	}
	buf := make([]byte, 0, len(spent)*8)
	var prev int64
	for _, s := range spent {
		at := s.At.UnixNano()
		buf = binary.AppendVarint(buf, at-prev)
		buf = binary.AppendUvarint(buf, uint64(s.N))
		prev = at
	}
	return buf
}

func decodeSpent(buf []byte) ([]throttle.Spend, error) {
	var out []throttle.Spend
	var prev int64
	for len(buf) > 0 {
		d, n := binary.Varint(buf)
		if n <= 0 {
			return nil, fmt.Errorf("sqlstore: corrupt spent column")
		}
		buf = buf[n:]
		c, m := binary.Uvarint(buf)
		if m <= 0 {
			return nil, fmt.Errorf("sqlstore: corrupt spent column")
		}
		buf = buf[m:]
		prev += d
		out = append(out, throttle.Spend{At: sqltime.Time(prev), N: int64(c)})
	}
	return out, nil
}
