def train(): pass
