package lint

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownLinks fails on a relative link in any markdown file of the
// repository whose target file does not exist, or whose #anchor names no
// heading of the markdown file it points into. Links with a scheme
// (https:, mailto:, ...) are not followed.
func TestMarkdownLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no markdown file found under the repository root")
	}
	checked := 0
	for _, f := range files {
		problems, n, err := checkLinks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		checked += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	t.Logf("%d markdown files, %d relative links checked", len(files), checked)
}

// TestMarkdownLinksFixture proves the check can fail: every link of
// testdata/links/broken.md is broken in a different way, and every link of
// testdata/links/good.md resolves.
func TestMarkdownLinksFixture(t *testing.T) {
	root := filepath.Join("testdata", "links")
	problems, n, err := checkLinks(root, filepath.Join(root, "good.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 || n != 7 {
		t.Errorf("good.md: %d links checked, problems %q; want 7 and none", n, problems)
	}

	problems, n, err = checkLinks(root, filepath.Join(root, "broken.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"missing.md",
		"good.md#no-such-heading",
		"#nowhere",
		"sub/gone.txt",
		"good.md#second-heading-2",
		"../../testdata/links/absent.md",
	}
	if n != len(want) || len(problems) != len(want) {
		t.Fatalf("broken.md: %d links checked, %d problems %q; want %d of each", n, len(problems), problems, len(want))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], "("+w+")") {
			t.Errorf("problem %d = %q, want it to name %q", i, problems[i], w)
		}
	}
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional "title" after the target.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink matches a reference definition: [label]: target
	refLink   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	scheme    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	codeSpan  = regexp.MustCompile("`+[^`]*`+")
	atxHeader = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// checkLinks checks the relative links of the markdown file path; a link
// starting with "/" is taken from root. It returns one problem per broken
// link, in file order, and the number of relative links checked.
func checkLinks(root, path string) ([]string, int, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var problems []string
	checked := 0
	for i, line := range markdownLines(string(src)) {
		if line == "" {
			continue
		}
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if scheme.MatchString(target) {
				continue
			}
			checked++
			if msg := resolve(root, path, target); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: broken link (%s): %s", path, i+1, target, msg))
			}
		}
	}
	return problems, checked, nil
}

// markdownLines returns the lines of a markdown document with fenced code
// blocks blanked and code spans removed, so that neither is read as links.
func markdownLines(src string) []string {
	lines := strings.Split(src, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			lines[i] = ""
			continue
		}
		lines[i] = codeSpan.ReplaceAllString(line, "")
	}
	return lines
}

// resolve returns why target, a relative link in the file from, does not
// resolve, or "" when it does.
func resolve(root, from, target string) string {
	file, anchor, _ := strings.Cut(target, "#")
	dest := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			dest = filepath.Join(root, filepath.FromSlash(file))
		} else {
			dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(file))
		}
		if _, err := os.Stat(dest); err != nil {
			return "no such file"
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	src, err := os.ReadFile(dest)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors(string(src)), anchor) {
		return fmt.Sprintf("no heading with anchor %q in %s", anchor, filepath.Base(dest))
	}
	return ""
}

// anchors returns the anchors of a markdown document's headings as GitHub
// renders them: lower case, punctuation dropped, spaces as hyphens, and
// "-1", "-2", ... appended to repeats.
func anchors(src string) []string {
	var out []string
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		m := atxHeader.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := seen[slug]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", slug, n))
		} else {
			out = append(out, slug)
		}
		seen[slug]++
	}
	return out
}

// headingLink keeps the text of a link inside a heading.
var headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

func slugify(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
