"""The demo's house rules (docs/architecture.md), checked: the API keeps its endpoints and parameters, gradio lives in
the demo's ui modules alone (its internals in one module of the core), each part of a demo section imports only what it
may, the server does not load the Trainer, and the top level stays the textbook."""

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Every named endpoint with its parameters (name, default, type), as Gradio describes them to clients; saved from the
# app before the demo moved into the explorer package (commit ffc0f55), so that a change of the API shows here.
SAVED_API = Path(__file__).resolve().parent / "data" / "api_description.json"


def api_description(demo) -> dict:
    named = demo.get_api_info()["named_endpoints"]
    return {
        name: [
            {
                "name": p["parameter_name"],
                "default": p.get("parameter_default"),
                "has_default": p["parameter_has_default"],
                "type": p.get("python_type", {}).get("type"),
            }
            for p in endpoint["parameters"]
        ]
        for name, endpoint in sorted(named.items())
    }


def test_every_endpoint_keeps_its_name_and_parameters(tmp_path, monkeypatch):
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.page.ui import build_demo

    monkeypatch.setenv("MINIGPT_RUNS_DIR", str(tmp_path))  # no finished run of this checkout joins the picker
    demo = build_demo(DemoState.configure())
    assert api_description(demo) == json.loads(SAVED_API.read_text())


def python_files() -> list[Path]:
    """The project's code: the top level and the package (not the tests, benchmarks, docs' scripts or model copies)."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    paths = (
        {REPO / line for line in tracked.stdout.split()}
        | set(REPO.glob("*.py"))
        | set((REPO / "minigpt").rglob("*.py"))
    )
    skipped = ("tests/", "bench/", "docs/", "minigpt/models/")
    return sorted(p for p in paths if p.exists() and not str(p.relative_to(REPO)).startswith(skipped))


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every module an import statement of the file names, anywhere in it (functions too): `from a.b import c` names
    a.b and a.b.c (c may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def imports_of(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_names(path)}


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports."""
    files = {module_name(path): path for path in python_files()}
    return {name: {m for m in imported_names(path) if m in files and m != name} for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan): each is a cycle of imports."""
    index, low, stack, found = {}, {}, [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


# The training room (streams and corpora import nothing of the project: rooms of their own do as well).
TRAINING_ROOM = (
    "minigpt.training",
    "minigpt.presets",
    "minigpt.training_flags",
    "minigpt.checkpoints",
    "minigpt.training_outputs",
    "minigpt.data",
    "minigpt.reading",
    "minigpt.tokens",
    "minigpt.tokenization",
    "minigpt.plots",
)


# The core's two modules that put Gradio on the whole page (the error rule on every event, Gradio's internals): ui part.
PAGE_PLUMBING = ("minigpt.demo.core.error_rule", "minigpt.demo.core.gradio_internals")


def demo_part(module: str) -> str:
    """The part of the demo a module of minigpt.demo belongs to, as its name says: "ui" (`ui.py`, `*_ui.py`: lays out
    and wires the page; and the core's error rule and Gradio internals), "views" (`view.py`, `*_view.py`: HTML from the
    answers), "entry" (minigpt.demo.app, which builds the page) or "computing" (any other: the numbers, JSON in and out,
    and the words)."""
    name = module.rsplit(".", 1)[-1]
    if module == "minigpt.demo.app":
        return "entry"
    if name == "ui" or name.endswith("_ui") or module in PAGE_PLUMBING:
        return "ui"
    if name == "view" or name.endswith("_view"):
        return "views"
    return "computing"


def room(module: str) -> str:
    """The part of the house a module belongs to (docs/architecture.md); the demo's three parts and its entry, each a
    room."""
    if module.startswith("minigpt.demo"):
        return f"demo: {demo_part(module)}"
    if module.startswith("minigpt.heads"):
        return "heads"
    if module in TRAINING_ROOM:
        return "training"
    if module in ("modeling_minigpt", "configuration_minigpt"):
        return "model"
    return module  # app, train, minigpt, minigpt.errors, minigpt.lens: each a room of its own


def test_imports_flow_one_way_between_modules_and_between_rooms():
    graph = import_graph()
    assert {"minigpt.heads.recorded_pass", "minigpt.demo.page.ui", "minigpt.training", "app"} <= set(graph)
    assert cycles(graph) == []
    rooms = {}
    for module, imported in graph.items():
        rooms.setdefault(room(module), set()).update(room(m) for m in imported if room(m) != room(module))
    assert cycles(rooms) == [], rooms


def test_the_library_imports_torch_transformers_and_the_model_alone():
    """minigpt.heads: numbers in, numbers out. Its files import no demo or training module and no third-party package
    but torch, transformers and safetensors (the snapshots' format); and it loads with Gradio and datasets absent."""
    allowed_project = ("minigpt.heads", "minigpt.errors", "modeling_minigpt", "configuration_minigpt")
    allowed_packages = {"torch", "transformers", "safetensors"}
    library = [path for path in python_files() if module_name(path).startswith("minigpt.heads")]
    assert len(library) >= 7
    for path in library:
        for name in imported_names(path):
            top = name.split(".")[0]
            if top in ("minigpt", "modeling_minigpt", "configuration_minigpt"):
                assert name == "minigpt" or name.startswith(allowed_project), (path.name, name)
            else:
                assert top in sys.stdlib_module_names or top in allowed_packages, (path.name, name)
    check = (
        "import sys; sys.modules.update(gradio=None, datasets=None); import minigpt.heads; "
        "print(sorted(m for m, v in sys.modules.items() if v and m.startswith(('minigpt.demo', 'minigpt.training', "
        "'gradio'))))"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr[-2000:]


def test_gradio_is_imported_by_the_ui_part_only():
    files = python_files()
    assert any(path.parts[-2:] == ("page", "ui.py") for path in files)  # the scan sees the package
    importers = {module_name(path) for path in files if "gradio" in imports_of(path)}
    in_ui = [name.startswith("minigpt.demo.") and demo_part(name) == "ui" for name in importers]
    assert importers and all(in_ui), importers


def test_each_part_of_the_demo_imports_only_what_it_may():
    """A section is a package of minigpt/demo: its computing modules (endpoints.py and the others: JSON in and out; its
    words), its views (view.py, *_view.py: HTML from that JSON) and its ui (ui.py: lays out and wires). The ui imports
    no torch and no minigpt.heads (the numbers are the computing modules'); a computing module imports no view and no
    ui; a view imports no ui."""
    modules = {module_name(path) for path in python_files()}
    part_of = lambda name: demo_part(name) if name in modules and name.startswith("minigpt.demo.") else None  # noqa: E731
    forbidden = {
        "ui": lambda name: name.split(".")[0] == "torch" or name.startswith("minigpt.heads"),
        "computing": lambda name: part_of(name) in ("views", "ui", "entry"),
        "views": lambda name: part_of(name) in ("ui", "entry"),
        "entry": lambda name: False,
    }
    parts = {}
    for path in python_files():
        module = module_name(path)
        if module.startswith("minigpt.demo."):
            part = demo_part(module)
            parts[part] = parts.get(part, 0) + 1
            wrong = sorted(name for name in imported_names(path) if forbidden[part](name))
            assert not wrong, f"{path.relative_to(REPO)} ({part}) imports {wrong}"
    assert parts["ui"] >= 10 and parts["views"] >= 9 and parts["computing"] >= 20, parts  # the scan sees each part


GRADIO_INTERNALS = {
    "fns",
    "blocks",
    "preprocess",
}  # a built page's table of functions and of components; a component's check


def test_gradios_internals_are_touched_from_one_module():
    """Gradio beyond its documented API (its submodules, a built page's `fns` and `blocks`, a component's `preprocess`)
    is used in minigpt/demo/core/gradio_internals.py alone, where tests/test_gradio_internals.py checks each use against
    the pinned Gradio through a real call."""
    users = {}
    for path in python_files():
        tree = ast.parse(path.read_text())
        submodules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        submodules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        touched = {name for name in submodules if (name or "").startswith("gradio.")}
        touched |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} & GRADIO_INTERNALS
        if touched:
            users[str(path.relative_to(REPO))] = sorted(touched)
    assert set(users) == {"minigpt/demo/core/gradio_internals.py"}, users


MODEL = {"modeling_minigpt", "configuration_minigpt"}  # "the model" in the map: the two textbook files


def project_imports(path: Path, modules: set[str]) -> set[str]:
    """The project's modules a file imports: `from a.b import c` names a.b.c where that is a module (`from minigpt
    import heads`: minigpt.heads), else a.b; `import a.b` names a.b."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found |= submodules or {node.module}
    return {name for name in found if name in modules} - {module_name(path)}


def map_rows() -> dict[str, list[str]]:
    """docs/architecture.md's module map: each module's path -> its "may import" entries, as written."""
    rows = {}
    for line in (REPO / "docs" / "architecture.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0].endswith(".py`"):
            assert cells[0] not in rows, f"{cells[0]} is in the module map twice"
            rows[cells[0].strip("`")] = [e for e in re.split(r",\s*", re.sub(r"\(.*?\)", "", cells[3])) if e]
    return rows


def resolved(entry: str, module: str, modules: set[str]) -> set[str]:
    """A "may import" entry of `module`'s row as module names: `nothing of the project` (none), `the model`, an
    absolute name, or a name relative to the row's own package, else to the demo's core, minigpt.demo or minigpt.heads,
    else minigpt (`view` in circuits/ui.py is minigpt.demo.circuits.view, `state` minigpt.demo.core.state, `maps.view`
    minigpt.demo.maps.view, `core.view` minigpt.demo.core.view)."""
    entry = entry.split(":")[-1].strip().strip("`").strip().removesuffix(".*")  # "each section's ui module: `x`"
    if entry.startswith("nothing") or entry == "—":
        return set()
    if entry == "the model":
        return MODEL
    if entry in modules:
        return {entry}
    bases = [module.rsplit(".", 1)[0], "minigpt.demo.core", "minigpt.demo", "minigpt.heads", "minigpt"]
    found = (f"{base}.{entry}" for base in bases if f"{base}.{entry}" in modules - {module})
    return {next(found, entry)}


def covers(entry: str, name: str) -> bool:
    """An entry names the module, or the package it is in (`minigpt.heads`: the library)."""
    return name == entry or name.startswith(entry + ".")


def test_every_row_of_the_module_map_is_true():
    """The map lists every module once, and each row's "may import" column is what the module imports of the project:
    nothing more (every import is listed) and nothing less (every entry is imported)."""
    files = {str(p.relative_to(REPO)): p for p in python_files()}
    rows = map_rows()
    assert sorted(rows) == sorted(files), f"missing {set(files) - set(rows)}, extra {set(rows) - set(files)}"
    modules = {module_name(p) for p in files.values()}
    wrong = {}
    for path, entries in rows.items():
        module = module_name(files[path])
        listed = [resolved(entry, module, modules) for entry in entries]
        actual = project_imports(files[path], modules)
        unlisted = {name for name in actual if not any(covers(e, name) for group in listed for e in group)}
        unused = [
            e for e, group in zip(entries, listed) if group and not any(covers(g, n) for g in group for n in actual)
        ]
        if unlisted or unused:
            wrong[path] = {"imports but does not list": sorted(unlisted), "lists but does not import": unused}
    assert not wrong, "docs/architecture.md's module map is untrue:\n" + "\n".join(
        f"{k}: {v}" for k, v in wrong.items()
    )


def declared(requirements: str) -> set[str]:
    """Distribution names (normalised) of requirement lines: 'torch==2.13.0', 'gradio>=6.0,<7'."""
    names = set()
    for line in requirements.splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_every_package_the_code_imports_is_declared_in_pyproject_and_pinned_in_requirements():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    in_pyproject = declared("\n".join(project["dependencies"]))
    in_interp = declared("\n".join(project["optional-dependencies"]["interp"]))
    pinned = declared((REPO / "requirements.txt").read_text())
    pinned_interp = declared((REPO / "requirements-interp.txt").read_text())
    distributions = importlib.metadata.packages_distributions()
    ours = {module_name(path).split(".")[0] for path in python_files()}
    for path in python_files():
        for top in imports_of(path) - ours - set(sys.stdlib_module_names):
            for distribution in distributions[top]:
                name = distribution.lower().replace("_", "-")
                if name in in_interp:  # the optional TransformerLens adapter (lens.py): pip install ".[interp]"
                    assert name in pinned_interp and path.name == "lens.py", (path.name, name)
                else:
                    assert name in in_pyproject, f"{path.relative_to(REPO)} imports {top}: {name} not in pyproject"
                    assert name in pinned, f"{path.relative_to(REPO)} imports {top}: {name} not in requirements.txt"
    for name in in_pyproject:  # and each one pinned for the Space and CI
        assert name in pinned, f"{name} is a dependency but requirements.txt does not pin it"


def test_the_server_does_not_load_the_trainer():
    """The server's modules (minigpt.demo.app, what app.py runs) leave transformers.trainer out: the training process
    alone imports it."""
    check = "import sys, minigpt.demo.app; print('transformers.trainer' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_a_training_runs_process_runs_app_py_again_without_importing_the_demo():
    """What multiprocessing does to each Train-tab run's process before its target (CPython gh-126631: the fork
    server's "__main__" preload is dead code before 3.13.8): app.py run again as "__mp_main__" imports neither Gradio
    nor the demo (seconds a run, otherwise)."""
    check = "import runpy, sys; runpy.run_path('app.py', run_name='__mp_main__'); print(sorted(m for m in sys.modules"
    check += " if m.split('.')[0] in ('gradio', 'minigpt', 'torch')))"
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_top_level_is_the_textbook_and_modules_and_functions_stay_short():
    """Issue 49's bounds: the model file <= 530 lines and the config <= 120 (the textbook, not its workarounds or the
    training schedules), every other module <= 500, every function <= 80."""
    top = sorted(path.name for path in REPO.glob("*.py"))
    assert top == ["app.py", "configuration_minigpt.py", "modeling_minigpt.py", "train.py"], top
    bounds = {"modeling_minigpt.py": 530, "configuration_minigpt.py": 120}
    lines = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in python_files()}
    long = {path: n for path, n in lines.items() if n > bounds.get(path, 500)}
    assert not long, long
    functions = {
        f"{path.relative_to(REPO)}:{node.name}": node.end_lineno - node.lineno + 1
        for path in python_files()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 80
    }
    assert not functions, functions
