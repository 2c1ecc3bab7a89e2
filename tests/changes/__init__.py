"""Pure tests of the change-set rules (allotment.changes): no database, no clock."""
