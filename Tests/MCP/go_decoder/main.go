// An MCP server's decoding, as Go's encoding/json does it: member names matched to struct tags
// case-insensitively (with Unicode's simple folding: ſ is s, the Kelvin sign is k), the last
// match winning. The go-sdk before 1.3.1, mark3labs/mcp-go and many servers decode this way.
//
// It answers every JSON-RPC request with what it decoded (method, name, uri, ref) as its result,
// and prints every message it decoded on a line of its standard output, after its port on the first
// line. Used by GatewayTests' MCPDecoderDifferentialTests: whatever the gateway forwards, this
// server must read as the gateway decided.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
)

type ref struct {
	Type string `json:"type"`
	Name string `json:"name"`
	URI  string `json:"uri"`
}

type params struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
	Ref  *ref   `json:"ref"`
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *params         `json:"params"`
}

type decoded struct {
	Method  string `json:"method"`
	Name    string `json:"name"`
	URI     string `json:"uri"`
	RefName string `json:"ref_name"`
	RefURI  string `json:"ref_uri"`
}

var mu sync.Mutex

func decode(m message) decoded {
	d := decoded{Method: m.Method}
	if m.Params != nil {
		d.Name, d.URI = m.Params.Name, m.Params.URI
		if m.Params.Ref != nil {
			d.RefName, d.RefURI = m.Params.Ref.Name, m.Params.Ref.URI
		}
	}
	return d
}

func answer(m message) []byte {
	d := decode(m)
	line, _ := json.Marshal(d)
	mu.Lock()
	fmt.Println(string(line)) // os.Stdout is unbuffered: the line is out before the answer
	mu.Unlock()
	if len(m.ID) == 0 {
		return nil
	}
	result, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"decoded": d}})
	return result
}

func serveMCP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable", http.StatusBadRequest)
		return
	}
	var out []byte
	if trimmed := strings.TrimSpace(string(body)); strings.HasPrefix(trimmed, "[") {
		var batch []message
		if err := json.Unmarshal(body, &batch); err != nil {
			http.Error(w, "not JSON to Go", http.StatusBadRequest)
			return
		}
		var answers []json.RawMessage
		for _, m := range batch {
			if a := answer(m); a != nil {
				answers = append(answers, a)
			}
		}
		out, _ = json.Marshal(answers)
	} else {
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "not JSON to Go", http.StatusBadRequest)
			return
		}
		out = answer(m)
	}
	if out == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func main() {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	mux := http.NewServeMux()
	mux.HandleFunc("/", serveMCP)
	http.Serve(listener, mux)
}
