"""The slow part of some tests, run in threads of this process from when their module's
first test runs, so that it overlaps the module's other tests.

Such a part is a command line or two in processes of their own (a training run killed and
resumed, a compile log): mostly one core each, while the tests run here on the other. A
module names them in a dict, test name -> function of a fresh folder returning what the test
checks; a module-scoped fixture starts those of the tests selected in this session
(`background_jobs`); each test then takes its part's result (`Jobs.result`), which re-raises
what the part raised (its own asserts included).

Example:
    JOBS = {"test_resume": _killed_and_resumed}   # function(tmp_path) -> what is checked

    @pytest.fixture(scope="module")
    def background(request, tmp_path_factory):
        with background_jobs(request, tmp_path_factory, JOBS) as jobs:
            yield jobs

    def test_resume(background, request):
        saved_step, output = background.result(request)
"""

import contextlib
import threading


class Jobs:
    """Runs each function of `jobs` (name -> function(folder)) in a thread of its own, on a
    fresh folder of `tmp_path_factory`, from when it is made."""

    def __init__(self, jobs, tmp_path_factory):
        self._results = {}
        self._threads = {}
        for name, job in jobs.items():
            folder = tmp_path_factory.mktemp(name[:40])
            thread = threading.Thread(target=self._run, args=(name, job, folder), daemon=True,
                                      name=f"background {name}")
            self._threads[name] = thread
            thread.start()

    def _run(self, name, job, folder):
        try:
            self._results[name] = (job(folder), None)
        except BaseException as error:  # noqa: BLE001 - re-raised in the test
            self._results[name] = (None, error)

    def result(self, request):
        """What the running test's part returned, once it ended; what it raised, raised."""
        name = request.node.originalname
        self._threads[name].join()
        value, error = self._results[name]
        if error is not None:
            raise error
        return value

    def join(self):
        for thread in self._threads.values():
            thread.join()


@contextlib.contextmanager
def background_jobs(request, tmp_path_factory, jobs):
    """`Jobs` of the tests of `jobs` selected in this session in the requesting module; at
    exit, waits for the parts still running (each ends by its own time limit)."""
    selected = {item.originalname for item in request.session.items
                if item.module is request.module}
    started = Jobs({name: job for name, job in jobs.items() if name in selected},
                   tmp_path_factory)
    try:
        yield started
    finally:
        started.join()
