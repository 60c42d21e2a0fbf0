"""The admin: pages, forms, operator actions, the live admin, real browsers."""
