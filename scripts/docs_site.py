"""Builds distlab's documentation site into build/site (run by scripts/docs.sh).

Pages, in the sidebar's order:
- index.html: the syllabus (examples/00_start_here.ipynb as saved), its lesson names linked to the lesson pages;
- one page per walkthrough, from the notebook as executed by the tests (build/executed/, written by
  tests/walkthrough_runs.py), with its real outputs and figures; a lesson that has not been executed here is shown as
  saved, with a banner that says so;
- one page per module notebook (nbs/), through nbdev's own notebook processors (front matter, `show_doc` for
  every exported name, export cells folded into their documentation, links to names), in its saved state.

Nothing is executed: the module pages' `show_doc` cells are filled by importing the generated module, and every
other cell keeps the outputs it was saved with (module notebooks are saved clean, so they have none).
Quarto is not used: PyPI's quarto-cli is a source package that downloads Quarto's binary from GitHub when it is
built, which a machine that reaches only the package registries cannot do; the pages are rendered with nbconvert.
"""
import argparse, html, importlib, json, os, re, shutil, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES, NBS = ROOT / "examples", ROOT / "nbs"
WIDGET_NOTE = ("<div class='dl-widget'>An interactive widget was here (a prediction, the fix-it editor or the live "
               "lab): it works when you run this notebook in Jupyter.</div>")
CSS = """
body { margin: 0 0 0 18rem !important; padding: 0 2rem !important; }
.dl-nav { position: fixed; top: 0; left: 0; bottom: 0; width: 17rem; overflow-y: auto; padding: 1rem;
  background: #f6f8fa; border-right: 1px solid #ddd; font: 14px/1.45 system-ui, sans-serif; z-index: 10; }
.dl-nav h2 { font-size: 15px; margin: 1rem 0 .3rem; } .dl-nav ol, .dl-nav ul { padding-left: 1.2rem; margin: 0; }
.dl-nav a { text-decoration: none; color: #0550ae; } .dl-nav a.dl-here { font-weight: bold; color: #000; }
.dl-nav .dl-home { font-size: 17px; font-weight: bold; }
.dl-banner { margin: 1rem 2rem; padding: .6rem 1rem; font: 14px/1.45 system-ui, sans-serif; background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; }
.dl-widget { padding: .4rem .8rem; border-left: 4px solid #8c959f; background: #f6f8fa; color: #57606a; }
"""


def title_of(nb) -> str:
    "The notebook's first markdown heading (a walkthrough's or the syllabus's title)."
    for c in nb.cells:
        if c.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", c.source, re.M)
            if m: return m.group(1).strip()
    return "untitled"


# ---- module notebooks: nbdev's processors, show_doc from the generated module -------------------------------------
def _processors():
    "nbdev's documentation processors, less `exec_show_docs` (it runs every cell that imports, tests included)."
    import functools, nbdev.config, nbdev.processors, nbdev.process, nbdev.showdoc, nbdev.doclinks, nbdev.frontmatter
    orig = nbdev.config.get_config
    cached = functools.cache(orig)  # nbdev reads pyproject.toml again for every cell
    for m in list(sys.modules.values()):
        if getattr(m, "__name__", "").startswith("nbdev") and getattr(m, "get_config", None) is orig: m.get_config = cached
    from nbdev.processors import FilterDefaults

    class NoExec(FilterDefaults):
        def base_procs(self): return [p for p in super().base_procs() if p.__name__ != "exec_show_docs"]
    return NoExec()


def _module_of(src: Path) -> str | None:
    m = re.search(r"#\|\s*default_exp\s+([\w.]+)", src.read_text())
    return f"distlab.{m.group(1)}" if m else None


def _fill_show_docs(nb, module: str | None, problems: list):
    "Each `show_doc(X)` cell gets show_doc's markdown for X, X taken from the generated module (nothing else runs)."
    import nbformat
    from nbdev.showdoc import show_doc
    ns = {}
    if module:
        try: ns.update(vars(importlib.import_module(module)))
        except Exception as e: problems.append(f"{module}: import failed: {e!r}")
    for c in nb.cells:
        if c.cell_type != "code": continue
        body = "\n".join(l for l in c.source.splitlines() if not l.startswith("#|")).strip()
        if not re.fullmatch(r"show_doc\(.+\)", body, re.S): continue
        try: md = re.sub(r"\]\(([^)]*)\)\{[^}]*\}", r"](\1)", eval(body, {**ns, "show_doc": show_doc})._repr_markdown_())  # Quarto's {attrs}
        except Exception as e:
            problems.append(f"{module}: {body}: {e!r}"); md = f"`{body}` could not be shown: {e!r}"
        c.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": md})]


def _directives_to_tags(nb):
    "Quarto's cell options (`#| echo: false`, `#| output: false`, `#| include: false`) as nbconvert's removal tags."
    for c in nb.cells:
        if c.cell_type != "code": continue
        lines, opts = c.source.splitlines(), {}
        while lines and lines[0].startswith("#|"):
            k, _, v = lines.pop(0)[2:].partition(":"); opts[k.strip()] = v.strip().lower()
        c.source = "\n".join(lines)
        tags = c.metadata.setdefault("tags", [])
        if opts.get("include") == "false": tags.append("remove_cell")
        if opts.get("echo") == "false" or not c.source.strip(): tags.append("remove_input")
        if opts.get("output") == "false": tags.append("remove_output")


def module_page(src: Path, procs, problems: list):
    "A module notebook through nbdev's processors: (notebook, output file name, title)."
    import nbformat
    from fastcore.nbio import read_nb, nb2str
    nb = read_nb(src)
    os.environ["IN_TEST"] = "1"
    procs(nb)
    os.environ.pop("IN_TEST", None)
    nb = nbformat.reads(nb2str(nb), as_version=4)
    fm, cells = {}, []
    for c in nb.cells:  # the front matter nbdev made (a raw cell); output-file gives the page's name, as on nbdev's sites
        if c.cell_type == "raw" and c.source.lstrip().startswith("---"):
            import yaml
            fm = yaml.safe_load(c.source.strip().strip("-")) or {}; continue
        if c.cell_type == "markdown" and "AUTOGENERATED" in c.source: continue
        cells.append(c)
    nb.cells = cells
    title, desc = fm.get("title") or src.stem, fm.get("description")
    head = f"# {title}" + (f"\n\n> {desc}" if desc else "")
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(head))
    _fill_show_docs(nb, _module_of(src), problems)
    _directives_to_tags(nb)
    return nb, fm.get("output-file") or f"{src.stem}.html", title


# ---- walkthroughs and the syllabus ---------------------------------------------------------------------------------
def _widgets_as_notes(nb):
    "A widget's view cannot run on a static page: say what it is instead of printing its repr."
    for c in nb.cells:
        for o in c.get("outputs", []):
            d = o.get("data") or {}
            if "application/vnd.jupyter.widget-view+json" in d:
                o["data"] = {"text/html": WIDGET_NOTE}
    nb.metadata.pop("widgets", None)


def lesson_page(stem: str, executed_dir: Path):
    "(notebook, banner) of one walkthrough: the executed copy if there is one, else the saved notebook."
    import nbformat
    ran = executed_dir / f"{stem}.ipynb"
    if ran.exists():
        nb = nbformat.read(str(ran), as_version=4)
        nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ran.stat().st_mtime))
        banner = (f"This page is the notebook as run by the tests on {when} (2 ranks, gloo, under papermill): every "
                  "output and figure below is what that run printed and drew.")
    else:
        nb = nbformat.read(str(EXAMPLES / f"{stem}.ipynb"), as_version=4)
        banner = ("Not executed here: this page shows the notebook as saved, without outputs. Run "
                  "`pytest tests/test_walkthroughs.py`, then `bash scripts/docs.sh`, to see its real outputs.")
    _widgets_as_notes(nb)
    return nb, banner


def syllabus_page(lessons: dict):
    "examples/00_start_here.ipynb, each lesson's name a link to its page."
    import nbformat
    nb = nbformat.read(str(EXAMPLES / "00_start_here.ipynb"), as_version=4)
    for c in nb.cells:
        if c.cell_type == "markdown":
            c.source = re.sub(r"`(0[1-9]_[a-z_]+)`", lambda m: f"[`{m[1]}`]({m[1]}.html)" if m[1] in lessons else m[0], c.source)
    return nb


# ---- rendering -----------------------------------------------------------------------------------------------------
def _nav(pages: list, here: str) -> str:
    def a(href, text): return f"<a href='{href}'{' class=dl-here' if href == here else ''}>{html.escape(text)}</a>"
    out = ["<nav class='dl-nav'>", a("index.html", "distlab: start here").replace("<a ", "<a class=dl-home ", 1)]
    for group, tag in (("Lessons", "ol"), ("API (module notebooks)", "ul")):
        items = [p for p in pages if p["group"] == group]
        if items: out += [f"<h2>{group}</h2><{tag}>"] + [f"<li>{a(p['href'], p['title'])}</li>" for p in items] + [f"</{tag}>"]
    return "\n".join(out + ["</nav>"])


def render(pages: list, site: Path):
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    cfg = Config()
    cfg.TagRemovePreprocessor.enabled = True
    cfg.HTMLExporter.exclude_input_prompt = True  # "In [ ]:" beside every unexecuted module cell says nothing
    cfg.TagRemovePreprocessor.remove_cell_tags = {"remove_cell"}
    cfg.TagRemovePreprocessor.remove_input_tags = {"remove_input"}
    cfg.TagRemovePreprocessor.remove_all_outputs_tags = {"remove_output"}
    class Exporter(HTMLExporter):
        "nbconvert's lab page, less its BeautifulSoup pass (alt text, tab stops): a third of the time on 3 MB pages."
        def from_notebook_node(self, nb, resources=None, **kw):
            from nbconvert.exporters.html import Highlight2HTML, WidgetsDataTypeFilter
            from nbconvert.exporters.templateexporter import TemplateExporter
            resources = self._init_resources(resources)
            self.register_filter("highlight_code", self.filters.get("highlight_code", Highlight2HTML(pygments_lexer="ipython3", parent=self)))
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources))
            return TemplateExporter.from_notebook_node(self, nb, resources, **kw)
    exporter = Exporter(config=cfg, template_name="lab")
    exporter.register_filter("clean_html", lambda s: s)  # the project's own notebooks: nothing to sanitize, and it is slow
    for p in pages:
        body, _ = exporter.from_notebook_node(p["nb"], resources={"metadata": {"name": p["title"]}})
        extra = f"<style>{CSS}</style>"
        top = _nav(pages, p["href"]) + (f"<div class='dl-banner'>{html.escape(p['banner'])}</div>" if p.get("banner") else "")
        body = body.replace("</head>", extra + "</head>", 1).replace("<img src=", "<img alt='figure' src=")
        body = re.sub(r"(<body[^>]*>)", lambda m: m[1] + top, body, count=1)
        (site / p["href"]).write_text(body)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", default=str(ROOT / "build" / "site"))
    ap.add_argument("--executed", default=os.environ.get("DISTLAB_EXECUTED_DIR") or str(ROOT / "build" / "executed"))
    ap.add_argument("--modules", default="*.ipynb", help="glob of the module notebooks to render (nbs/); '' for none")
    a = ap.parse_args(argv)
    os.chdir(ROOT)  # nbdev reads its settings from pyproject.toml here
    t0, problems, pages = time.monotonic(), [], []
    site = Path(a.site)
    shutil.rmtree(site, ignore_errors=True); site.mkdir(parents=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from walkthrough_runs import WALKTHROUGHS
    import nbformat
    lessons = {}
    for w in WALKTHROUGHS:
        nb, banner = lesson_page(w.stem, Path(a.executed))
        lessons[w.stem] = dict(nb=nb, href=f"{w.stem}.html", title=title_of(nb), group="Lessons", banner=banner)
    pages.append(dict(nb=syllabus_page(lessons), href="index.html", title="Start here", group=None))
    pages += lessons.values()
    if a.modules:
        procs = _processors()
        for src in sorted(NBS.glob(a.modules)):
            nb, href, title = module_page(src, procs, problems)
            pages.append(dict(nb=nb, href=href, title=f"{src.stem.split('_', 1)[0]} {title}", group="API (module notebooks)"))
    render(pages, site)
    executed = sum("as run by the tests" in (p.get("banner") or "") for p in lessons.values())
    print(f"docs site: {len(pages)} pages ({executed} of {len(lessons)} lessons as executed) in {site}, "
          f"{time.monotonic() - t0:.1f} s")
    for p in problems: print("  note:", p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
