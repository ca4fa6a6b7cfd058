// Command protobuf-fuzz writes random objects of every kind of k8s.io/api (client-go's scheme),
// filled by apimachinery's API fuzzer, each as the protobuf body client-go sends for it
// (<name>.pb) and as its JSON (<name>.json, encoding/json). kcr-envtest's
// tests/protobuf_fuzz.rs runs it and checks that its decoder turns every body into the JSON and
// its encoder the JSON into the same bytes.
//
// Test tooling only. By hand, from tools/control-plane/v1.37:
//
//	go run ./cmd/protobuf-fuzz OUTPUT_DIR [PER_KIND [SEED]]
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: protobuf-fuzz OUTPUT_DIR [PER_KIND [SEED]]")
		os.Exit(2)
	}
	dir := os.Args[1]
	perKind, seed := 2, int64(1)
	if len(os.Args) > 2 {
		perKind, _ = strconv.Atoi(os.Args[2])
	}
	if len(os.Args) > 3 {
		seed, _ = strconv.ParseInt(os.Args[3], 10, 64)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	filler := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs)
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

	var kinds []schema.GroupVersionKind
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") {
			continue
		}
		kinds = append(kinds, gvk)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	written, skipped := 0, 0
	for _, gvk := range kinds {
		for i := 0; i < perKind; i++ {
			obj, err := scheme.Scheme.New(gvk)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			filler.Fill(obj)
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			var first bytes.Buffer
			if err := pb.EncodeWithAllocator(obj, &first, &runtime.SimpleAllocator{}); err != nil {
				skipped++
				continue
			}
			// The object as a server decodes it from protobuf (an empty slice is nil there),
			// and that object's protobuf and JSON.
			decoded, _, err := pb.Decode(first.Bytes(), &gvk, nil)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%v: its own protobuf does not decode: %v\n", gvk, err)
				os.Exit(1)
			}
			decoded.GetObjectKind().SetGroupVersionKind(gvk)
			var body bytes.Buffer
			if err := pb.EncodeWithAllocator(decoded, &body, &runtime.SimpleAllocator{}); err != nil {
				skipped++
				continue
			}
			js, err := json.Marshal(decoded)
			if err != nil {
				skipped++
				continue
			}
			name := fmt.Sprintf("%s_%s_%s_%d", strings.ReplaceAll(gvk.Group, ".", "-"), gvk.Version, gvk.Kind, i)
			if gvk.Group == "" {
				name = "core" + name
			}
			for file, data := range map[string][]byte{name + ".pb": body.Bytes(), name + ".json": js} {
				if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
			}
			written++
		}
	}
	fmt.Printf("%d kinds, %d objects written, %d not encodable\n", len(kinds), written, skipped)
}
