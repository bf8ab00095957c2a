package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeExample holds the Go example of README.md to the code of
// Example_readme in engine/example_readme_test.go, which go test compiles
// and runs with its output checked: the README's first go block must be the
// lines between the example's "README begin" and "README end" markers.
func TestReadmeExample(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "engine", "example_readme_test.go"))
	if err != nil {
		t.Fatal(err)
	}

	var block []string
	in := false
	for _, line := range strings.Split(string(readme), "\n") {
		if !in && strings.TrimSpace(line) == "```go" {
			in = true
			continue
		}
		if in && strings.TrimSpace(line) == "```" {
			break
		}
		if in {
			block = append(block, line)
		}
	}
	if len(block) == 0 {
		t.Fatal("README.md has no go code block")
	}

	var code []string
	in = false
	for _, line := range strings.Split(string(example), "\n") {
		switch strings.TrimSpace(line) {
		case "// README begin":
			in = true
			continue
		case "// README end":
			in = false
		}
		if in {
			code = append(code, strings.TrimPrefix(line, "\t"))
		}
	}
	if len(code) == 0 {
		t.Fatal("engine/example_readme_test.go has no README markers")
	}

	for i := 0; i < max(len(block), len(code)); i++ {
		var got, want string
		if i < len(block) {
			got = block[i]
		}
		if i < len(code) {
			want = code[i]
		}
		if got != want {
			t.Fatalf("README.md's go block differs from Example_readme at line %d of the block:\nREADME:  %q\nexample: %q", i+1, got, want)
		}
	}
}
