import pytest
from .test_e2e_dashboard_page import manager, browser  # noqa
pytestmark = pytest.mark.e2e
def test_scratch(manager):
    p = manager.page
    p.wait_for_timeout(3000)
    manager.shot("scratch_home")
    print(p.locator("nav, .v-navigation-drawer").first.inner_text())
    print([a.get_attribute("href") for a in p.locator("a").all()][:80])
